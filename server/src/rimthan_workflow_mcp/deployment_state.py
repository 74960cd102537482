"""The state directory's activation floor for one deployment, and the floor check ``check --release`` makes.

``open_state`` is how the provider opens the floor of the deployment it serves (the trust keys, the releases
directory and the mode); ``check_directory_floor`` asks the same floor the default ``serve`` would keep.
"""

from __future__ import annotations

from pathlib import Path

from rimthan_workflow_registry.errors import RegistryError
from rimthan_workflow_registry.release import SCHEMA_CHECKS, SCHEMA_CHECKS_FILE, TrustStore

from .floor import FLOOR_FILE, ActivationFloor, deployment_of
from .loading import LoadedRelease


def check_directory_floor(loaded: LoadedRelease, trust: TrustStore, state_dir: Path) -> None:
    """``check --release``: the floor ``serve --releases-dir <its parent>`` keeps too (it has its own, apart from
    the explicit mode's), so a release check says ok is not then refused as a rollback by the default serve."""
    releases_dir = Path(loaded.release.root).parent
    try:
        open_state(state_dir, trust, releases_dir, serving=False).check(loaded.catalogue, loaded.version, loaded.digest)
    except RegistryError as exc:
        raise RegistryError(
            exc.code,
            f"`serve --releases-dir {releases_dir}` would refuse it: {exc.message} (`serve --release` has a floor "
            "of its own and would load it)",
            path=exc.path,
            details=exc.details,
        ) from None


def open_state(
    state_dir: Path | None, trust: TrustStore, releases_dir: Path, *, serving: bool, explicit: bool = False
) -> ActivationFloor:
    """The state directory's activation floor for this deployment (trust keys, releases directory, mode).

    Serving also remembers metaschema passes across restarts there (``check`` writes nothing).
    """
    floor = ActivationFloor(
        state_dir / FLOOR_FILE if state_dir is not None else None,
        deployment_of(trust.keys, releases_dir, explicit=explicit),
    )
    if state_dir is not None and serving:
        SCHEMA_CHECKS.persist_to(state_dir / SCHEMA_CHECKS_FILE)
    return floor
