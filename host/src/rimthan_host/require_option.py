"""The environment variable that turns on ``rimthan-host serve --require-elicitation``.

A module of its own, importing nothing: the command line (``rimthan-host serve --help``, which imports neither
the SDK nor the bridge) and the bridge's refusal both name it.
"""

from __future__ import annotations

REQUIRE_ELICITATION_ENV = "RIMTHAN_REQUIRE_ELICITATION"
"""``--require-elicitation`` in the environment: for a host config of fixed arguments (the plugin's option)."""
