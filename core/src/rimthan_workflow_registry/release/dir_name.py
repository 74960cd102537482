"""A directory name that claims a release identity, ``<catalogue>-<semver>``: imported only for a name that could.

Unverified, for ordering and rollback hints only (the manifest is the
identity): the server's release scan orders releases by it, and
:mod:`.verify` refuses a release whose directory claims another identity. It
starts with a catalogue-name character, so hidden names (the packager's
``.<name>-<version>.building-*`` work directory, whose random suffix can read
like a pre-release) claim nothing: a build's self-check never compiles it.
"""

from __future__ import annotations

import re

# Matched whole (fullmatch: "$" would also take a trailing newline).
RELEASE_DIR_NAME = re.compile(
    r"(?P<name>[a-z0-9][a-z0-9-]*?)-(?P<version>[0-9]+\.[0-9]+\.[0-9]+(?:[-+][0-9A-Za-z.+-]*)?)"
)
