"""jsonschema's format checkers, each library loaded on first use, give exactly jsonschema's own verdicts.

``rimthan_workflow_registry.jsonschema_formats`` imports jsonschema with five
format libraries hidden and registers checkers that import them on first call.
Both sides are fresh copies of ``jsonschema/_format.py``, so the comparison
holds whatever imported jsonschema first in this process: the reference
executed with every library importable (jsonschema's eager checkers), the
other with the five hidden and the module's registrations added, as a server
start does. Both must name the same formats in every draft and give, for every
format and value, the same verdict, message and cause type. A fresh
interpreter shows the deferral itself: a server's imports load none of the
libraries, and a check loads its own.
"""

from __future__ import annotations

import ast
import importlib.util
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from types import ModuleType

import jsonschema._format
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from jsonschema.exceptions import FormatError
from rimthan_workflow_registry import jsonschema_formats
from support.releases import REPO_ROOT

DRAFTS = ("draft3", "draft4", "draft6", "draft7", "draft201909", "draft202012")
DEFERRED_FORMATS = ("hostname", "uri", "uri-reference", "date-time", "time", "uri-template", "duration")
HEAVY_MODULES = ("fqdn", "rfc3986_validator", "rfc3339_validator", "uri_template", "isoduration", "arrow", "dateutil")
CORPUS: tuple[object, ...] = (
    # hostname
    "example.com",
    "a",
    "a.b.c",
    "-a.com",
    "a-.com",
    "a..b",
    "a" * 63 + ".com",
    "a" * 64 + ".com",
    "xn--bcher-kva.ch",
    "example.com.",
    "ex_ample.com",
    "192.168.0.1",
    "",
    " ",
    "a b",
    "b\u00fccher.ch",
    ("a." * 127) + "a",
    # uri, uri-reference
    "http://example.com",
    "https://user@host:8080/p/a/t/h?query=1#frag",
    "urn:isbn:0451450523",
    "mailto:a@b.c",
    "//host/path",
    "/relative/path",
    "relative",
    "?q",
    "#f",
    "http://[::1]/",
    "http://[::1",
    "http://exa mple.com",
    "http://example.com/%zz",
    "http://example.com/%41",
    "HTTP://EXAMPLE.COM",
    "1http://x",
    "http:",
    ":",
    "a:b:c",
    "http://\u00e9.com",
    "x\n",
    "http://example.com\n",
    "file:///etc/passwd",
    "https://json-schema.org/draft/2020-12",
    # date-time, time
    "2026-12-03T13:30:00Z",
    "2026-12-03t13:30:00z",
    "2026-12-03T13:30:00.123+01:00",
    "2026-12-03 13:30:00Z",
    "2026-02-30T00:00:00Z",
    "2026-12-03T24:00:00Z",
    "2026-12-03T23:59:60Z",
    "2026-12-03T13:30:00",
    "13:30:00Z",
    "13:30:00+01:00",
    "13:30:00",
    "25:00:00Z",
    "13:30:00.5z",
    "1:30:00Z",
    "13:30:00Z\n",
    "2026-12-03",
    # uri-template
    "http://example.com/{id}",
    "{+path}/here",
    "{?x,y}",
    "{/list*}",
    "{x:3}",
    "{",
    "}",
    "{x",
    "{ x }",
    "{x}}",
    "{&x}",
    "{#x,y}",
    "{=x}",
    "{x:0}",
    "{x:10000}",
    "{%41}",
    "{.a.b}",
    "/a/{b}/{c*}",
    # duration
    "P1D",
    "P1Y2M3DT4H5M6S",
    "PT1H",
    "PT0.5S",
    "P1W",
    "P",
    "PT",
    "P1",
    "P1DT",
    "-P1D",
    "P1.5D",
    "P1M",
    "PT1M",
    "p1d",
    "P1Y1W",
    "PT36H",
    "P0D",
    "P1D ",
    "1D",
    # everything else jsonschema checks, and values that are not strings
    "a@b",
    "ab",
    "127.0.0.1",
    "::1",
    "fe80::1%eth0",
    "^a+$",
    "(",
    "2026-13-01",
    "0",
    "/a~0b",
    "/a~2",
    "0#",
    "1/a",
    "01/a",
    "550e8400-e29b-41d4-a716-446655440000",
    "550e8400e29b41d4a716446655440000",
    "\ud800",
    0,
    1.5,
    None,
    True,
    [],
    {},
)
TEXT = st.text(alphabet="aZ09-._~:/?#[]@!$&'()*+,;=%{}PTDWYHMSZtz \u00e9\n", max_size=30)


@contextmanager
def _hidden(names: tuple[str, ...]) -> Iterator[None]:
    saved = {name: sys.modules.get(name) for name in names}
    sys.modules.update(dict.fromkeys(names))  # type: ignore[arg-type]  # None: `import name` fails
    try:
        yield
    finally:
        for name, module in saved.items():
            if module is None:
                del sys.modules[name]
            else:
                sys.modules[name] = module


def _format_module(hide: tuple[str, ...]) -> ModuleType:
    """A fresh copy of jsonschema's format module, executed with the libraries ``hide`` names hidden."""
    spec = importlib.util.spec_from_file_location("_fresh_jsonschema_format", jsonschema._format.__file__)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    with _hidden(hide):
        spec.loader.exec_module(module)
    return module


def _deferred_format_module() -> ModuleType:
    """jsonschema's format module as a server start leaves it: libraries hidden, the lazy checkers registered."""
    hidden = jsonschema_formats._DEFERRED_LIBRARIES
    module = _format_module(hidden)
    checkers = [module._draft_checkers[draft] for draft in DRAFTS]
    jsonschema_formats._register_deferred_checkers(frozenset(hidden), checkers, module.FormatChecker.checkers)
    return module


EAGER = _format_module(())
DEFERRED = _deferred_format_module()


def _verdict(
    checker: jsonschema._format.FormatChecker, instance: object, format_name: str
) -> tuple[bool, str, type | None]:
    try:
        checker.check(instance, format_name)
    except FormatError as error:
        return False, error.message, type(error.cause) if error.cause is not None else None
    return True, "", None


def test_the_lazy_checkers_stand_in_for_the_hidden_libraries() -> None:
    """Else the comparisons below would compare jsonschema with itself."""
    assert DEFERRED._draft_checkers["draft202012"].checkers["uri"][0] is jsonschema_formats._is_uri
    assert DEFERRED._draft_checkers["draft3"].checkers["host-name"][0] is jsonschema_formats._is_host_name


@pytest.mark.parametrize("draft", DRAFTS)
def test_every_draft_names_the_formats_jsonschema_names_with_the_same_exceptions(draft: str) -> None:
    ours, eager = DEFERRED._draft_checkers[draft].checkers, EAGER._draft_checkers[draft].checkers
    assert sorted(ours) == sorted(eager)
    assert {name: raises for name, (_, raises) in ours.items() if name != "duration"} == {
        name: raises for name, (_, raises) in eager.items() if name != "duration"
    }


def test_format_checker_defaults_name_the_formats_jsonschema_names() -> None:
    ours, eager = DEFERRED.FormatChecker.checkers, EAGER.FormatChecker.checkers
    assert sorted(ours) == sorted(eager)
    assert ours["time"][0] is not jsonschema_formats._is_time  # draft 3's "time" keeps that name
    assert ours["time"][0].__name__ == eager["time"][0].__name__


@pytest.mark.parametrize("draft", DRAFTS)
def test_every_format_gives_jsonschemas_verdict_message_and_cause_on_the_corpus(draft: str) -> None:
    ours, eager = DEFERRED._draft_checkers[draft], EAGER._draft_checkers[draft]
    for format_name in eager.checkers:
        for instance in CORPUS:
            assert _verdict(ours, instance, format_name) == _verdict(eager, instance, format_name), (
                format_name,
                instance,
            )


def test_the_corpus_has_both_verdicts_for_every_deferred_format() -> None:
    checker = DEFERRED._draft_checkers["draft202012"]
    for format_name in DEFERRED_FORMATS:
        verdicts = {checker.conforms(instance, format_name) for instance in CORPUS if isinstance(instance, str)}
        assert verdicts == {True, False}, format_name


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(DEFERRED_FORMATS), TEXT)
def test_deferred_formats_give_jsonschemas_verdict_on_generated_strings(format_name: str, instance: str) -> None:
    ours, eager = DEFERRED._draft_checkers["draft202012"], EAGER._draft_checkers["draft202012"]
    assert _verdict(ours, instance, format_name) == _verdict(eager, instance, format_name)


def test_a_fresh_interpreter_defers_the_libraries_and_a_check_loads_only_its_own() -> None:
    code = (
        "import sys\n"
        "import rimthan_workflow_mcp.cli, rimthan_workflow_mcp.server\n"
        f"heavy = {HEAVY_MODULES!r}\n"
        "print(sorted(m for m in heavy if m in sys.modules))\n"
        "from rimthan_workflow_registry import jsonschema_formats as f\n"
        "print(sorted(m for m in heavy if m in sys.modules))\n"
        "assert f.FORMAT_CHECKER.checkers['uri'][0] is f._is_uri and f.FormatChecker.checkers['uri'][0] is f._is_uri\n"
        "assert f.Draft202012Validator({'format': 'uri'}, format_checker=f.FORMAT_CHECKER).is_valid('https://a.b')\n"
        "assert not f.Draft202012Validator.FORMAT_CHECKER.conforms('https://a b', 'uri')\n"
        "print(sorted(m for m in heavy if m in sys.modules))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=REPO_ROOT)
    assert result.stdout.splitlines() == ["[]", "[]", "['rfc3986_validator']"]


def test_rimthan_modules_import_jsonschema_only_through_the_one_module() -> None:
    """Whichever module imports jsonschema first decides whether the format libraries load at start."""
    offenders = []
    for source in sorted(REPO_ROOT.glob("*/src/**/*.py")):
        if source.name == "jsonschema_formats.py":
            continue
        for node in ast.walk(ast.parse(source.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module is not None:
                names = [node.module]
            else:
                continue
            if any(name == "jsonschema" or name.startswith("jsonschema.") for name in names):
                offenders.append(f"{source.relative_to(REPO_ROOT)}:{node.lineno}")
    assert offenders == []
