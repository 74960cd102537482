"""``rimthan-pack sign``: a co-signature added to a release that exists (k-of-n signing).

Registered on the ``rimthan-pack`` group when the group first looks it up
(:data:`~rimthan_packager.cli_options.COMMANDS_ELSEWHERE`): a build does not
import this module. The work is :mod:`rimthan_packager.cosign`'s, imported
when the command runs; the key is read as ``build`` reads its own
(:mod:`rimthan_packager.cli`).
"""

from __future__ import annotations

from pathlib import Path

import click
from rimthan_clikit import emit_json, reports_refusals, warn
from rimthan_workflow_registry.errors import FailureCode

from .cli import _signing_key
from .cli_options import _JSON, _epilog, _key_option, _trust_option, cli
from .user_cache import remembered_checks


@cli.command(
    epilog=_epilog(
        "rimthan-pack sign releases/research-decision-1.3.0 --key private-keys/colleague.key --trust keys/trust.toml",
    )
)
@click.argument("release", type=click.Path(file_okay=False, path_type=Path))
@_key_option("key_path", "Private signing key (PEM PKCS#8) of the co-signer.")
@_trust_option(
    "If given, every trusted signature already there must verify (fewer than its threshold is fine: that is "
    "what co-signing collects)."
)
@_JSON
@reports_refusals
@remembered_checks()
def sign(release: Path, key_path: Path, trust_path: Path | None, as_json: bool) -> None:
    """Add a co-signature to an existing release (k-of-n signing).

    The release's files, manifest and catalogue are verified first, then
    signatures/<keyid>.sig is added. Nothing else in the release changes.
    Refuses if this key has already signed.
    """
    from rimthan_workflow_registry.release import load_trust

    from .cosign import sign_release

    key = _signing_key(key_path)
    trust = load_trust(trust_path) if trust_path is not None else None
    if trust is not None and key.key_id not in trust.keys:
        _warn_untrusted_signer(release, key.key_id, trust.source)
    path = sign_release(release, key, trust=trust)
    if as_json:
        emit_json({"ok": True, "signature": str(path), "key_id": key.key_id})
        return
    click.echo(f"signed {release} with key {key.key_id}")
    click.echo(f"wrote {path}")


def _warn_untrusted_signer(release: Path, key_id: str, trust: str) -> None:
    """The co-signer's key is not in ``trust``: the signature is written (a new key's, before it is trusted) but
    counts toward no threshold; said with how to undo it when the key was the wrong one."""
    from rimthan_workflow_registry.release import SIGNATURES_DIR, signature_name

    written = release / SIGNATURES_DIR / signature_name(key_id)
    warn(
        FailureCode.SIGNATURE_UNTRUSTED,
        str(written),
        f"key {key_id} is not in the trust store {trust}: its signature will not count toward the threshold",
        f"if that was the wrong key, delete {written} (nothing else in the release changes) and sign with a key "
        "the trust store holds; if it should count, add its .pub to the trust store (keys/README.md, Add a key)",
    )
