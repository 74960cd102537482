"""Each field of a run's confirmed-state schema, as the verified release names it: what a fact's own form offers.

The verifier serves every file of a release it holds as a resource (``rimthan://releases/<hex>/<path>``). The
release's ``catalogue.toml`` names its workflow files; the one whose ``id`` and ``version`` are the run's
workflow's declares its ``confirmed_state_schema``, the path of the schema file. So the schema is found as the
release itself names it, whatever else a step lists. None known (``{}``) when the release gives none, or a file
cannot be read or parsed: the facts are then put to the person as passed, yes or no (the verifier checks every
value either way).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from rimthan_workflow_registry.release import CATALOGUE_MANIFEST_NAME, parse_catalogue_manifest, parse_workflow
from rimthan_workflow_registry.run import release_file_uri

from .protocol import ResourceReader


async def state_fields(
    read: ResourceReader | None, release: str, workflow: str, version: str
) -> dict[str, Mapping[str, Any]]:
    """Each property of the confirmed-state schema of ``workflow`` at ``version`` in ``release`` (a manifest
    digest), read from the verifier; ``{}`` if the release gives none or it cannot be read."""
    if read is None or not release or not workflow:
        return {}
    try:
        path = await _schema_path(read, release, workflow, version)
        schema = json.loads(await read(release_file_uri(release, path))) if path else None
    except Exception:  # (only the form is plainer: the verifier checks the value either way)
        return {}
    properties = schema.get("properties") if isinstance(schema, Mapping) else None
    if not isinstance(properties, Mapping):
        return {}
    return {str(k): v for k, v in properties.items() if isinstance(v, Mapping)}


async def _schema_path(read: ResourceReader, release: str, workflow: str, version: str) -> str | None:
    """The ``confirmed_state_schema`` the release's workflow file for ``workflow`` at ``version`` declares."""
    info, _ = parse_catalogue_manifest((await read(release_file_uri(release, CATALOGUE_MANIFEST_NAME))).encode("utf-8"))
    for path in info["workflows"]:
        found = parse_workflow((await read(release_file_uri(release, path))).encode("utf-8"), path)
        if found.id == workflow and (found.version == version or not version):
            return found.confirmed_state_schema
    return None
