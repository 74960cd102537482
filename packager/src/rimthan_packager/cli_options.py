"""The ``rimthan-pack`` click group and the options and help its commands share.

Kept apart from the commands so each command module (:mod:`~rimthan_packager.cli`,
:mod:`~rimthan_packager.cli_author`, :mod:`~rimthan_packager.cli_check`,
:mod:`~rimthan_packager.cli_inspect`, :mod:`~rimthan_packager.cli_oci`,
:mod:`~rimthan_packager.cli_sign`) registers on one group (``check`` and ``sign``
take the warnings and the key reading they share with ``build`` from ``cli``);
imports here stay light, as ``--help`` pays for them. The group imports the modules
other than ``cli`` only when one of their commands is looked up
(:data:`COMMANDS_ELSEWHERE`): a build imports none of them.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import click
from rimthan_clikit import EXIT_STATUS_EPILOG, RimthanGroup, epilog

_JSON = click.option("--json", "as_json", is_flag=True, help="Print a machine-readable JSON result on stdout.")
_SOURCE = click.argument("source", type=click.Path(file_okay=False, path_type=Path))  # build's and check's


def _epilog(*examples: str) -> str:
    return epilog(examples)


_TRUST_HELP = "Trust store: a directory of PEM *.pub files (threshold 1) or a TOML trust file with a threshold."


# The commands other modules than cli register, imported when one of them is run or listed (--help).
COMMANDS_ELSEWHERE = {
    "check": "rimthan_packager.cli_check",
    "init": "rimthan_packager.cli_author",
    "inspect": "rimthan_packager.cli_inspect",
    "keygen": "rimthan_packager.cli_author",
    "pull": "rimthan_packager.cli_oci",
    "push": "rimthan_packager.cli_oci",
    "sign": "rimthan_packager.cli_sign",
    "verify": "rimthan_packager.cli_inspect",
}


@click.group(
    cls=RimthanGroup,
    context_settings={"help_option_names": ["-h", "--help"]},
    epilog=EXIT_STATUS_EPILOG,
    commands_elsewhere=COMMANDS_ELSEWHERE,
)
@click.version_option(package_name="rimthan-packager", prog_name="rimthan-pack")
def cli() -> None:
    """Validate, build, sign, verify and inspect signed Rimthan workflow releases.

    \b
    Typical flow:
      rimthan-pack keygen --out private-keys/me --trust-dir keys/local   # once per engineer
      rimthan-pack build catalogues/NAME/VERSION --key private-keys/me.key
      rimthan-pack sign releases/NAME-VERSION --key private-keys/colleague.key   # k-of-n
      rimthan-pack verify releases/NAME-VERSION --trust keys/local
    """


def _trust_option(also: str = "") -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """``--trust``: the trust store, with what this command does with it."""
    text = f"{_TRUST_HELP} {also}" if also else _TRUST_HELP
    return click.option("--trust", "trust_path", type=click.Path(path_type=Path), help=text)


def _key_option(dest: str, text: str, *, multiple: bool = False) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """``--key``: a private signing key file (build takes several signers, sign one co-signer).

    A directory is not refused here (a usage error, exit 2) but by the key's loading, as a FIFO or a dangling
    link is: ``key_invalid``, exit 1.
    """
    return click.option(
        "--key", dest, multiple=multiple, required=True, metavar="FILE", type=click.Path(path_type=Path), help=text
    )
