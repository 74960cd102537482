"""docs/host-kit.md's Gemini CLI and Codex CLI configs are what their ``mcp add`` lines write.

``make interop`` runs the pinned CLIs and checks that they write ``interop/other_hosts.py``'s
``GEMINI_SETTINGS`` and ``CODEX_CONFIG`` (no account needed); this test keeps the page's blocks and
add lines the same, the JSON as Gemini CLI lays it out (two-space indent).
"""

from __future__ import annotations

import importlib.util
import json
import re
import sys
import tomllib
from types import ModuleType

from support.releases import REPO_ROOT


def _other_hosts() -> ModuleType:
    interop = str(REPO_ROOT / "interop")
    sys.path.insert(0, interop)  # other_hosts imports its sibling model_standin, as make interop runs it
    try:
        spec = importlib.util.spec_from_file_location("other_hosts", REPO_ROOT / "interop" / "other_hosts.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(interop)
    return module


def _block(label: str, language: str) -> str:
    page = (REPO_ROOT / "docs" / "host-kit.md").read_text("utf-8")
    found = re.search(rf"\*\*{label}\*\*.*?```{language}\n(.*?)\n```", page, re.S)
    assert found is not None, f"docs/host-kit.md lost its {label} {language} block"
    return found.group(1)


def test_the_documented_gemini_settings_are_what_gemini_mcp_add_writes() -> None:
    module = _other_hosts()
    assert _block("Gemini CLI", "sh") == "gemini " + " ".join(module.GEMINI_ADD)
    page = (REPO_ROOT / "docs" / "host-kit.md").read_text("utf-8")
    written = re.search(r"writes `\.gemini/settings\.json`.*?```json\n(.*?)\n```", page, re.S)
    assert written is not None and written.group(1) == json.dumps(module.GEMINI_SETTINGS, indent=2)


def test_the_documented_codex_config_is_what_codex_mcp_add_writes() -> None:
    module = _other_hosts()
    assert _block("Codex CLI", "sh") == "codex " + " ".join(module.CODEX_ADD)
    page = (REPO_ROOT / "docs" / "host-kit.md").read_text("utf-8")
    written = re.search(r"writes `~/\.codex/config\.toml`.*?```toml\n(.*?)\n```", page, re.S)
    assert written is not None and tomllib.loads(written.group(1)) == module.CODEX_CONFIG
