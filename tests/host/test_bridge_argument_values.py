"""Argument values a JSON-RPC line carries but the protocol cannot, sent raw to a real ``rimthan-host serve``.

An SDK client cannot send ``NaN``, ``1e999``, a lone surrogate escape
(``"\\ud800"``, in a string or a key), an integer past 2**53 - 1 or nesting
past the SDK parser's limit; a raw client or another language's can. Before
the fix a ``NaN`` fact came back as "an unexpected FloatDomainError", and a
lone surrogate was never answered: the SDK's parser refused the line and the
bridge dropped it. Now each is refused like any other argument problem
("Nothing was done: facts.topic ..."), before anything reaches the verifier
or the run files, and a line no parser reads gets a JSON-RPC Parse error for
its id. Every wait is bounded; after every call a normal one is answered.

The hypothesis test sends arbitrary JSON-ish arguments to every tool on one
long-lived bridge: ``make test`` runs ``EXAMPLES``, ``make fuzz-long``
``RIMTHAN_FUZZ_BRIDGE_ARGUMENTS`` (10,000 by default).
"""

from __future__ import annotations

import itertools
import json
import os
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rimthan_host.tools import ARGUMENT_DEPTH, TOOLS
from rimthan_host.words import TEXT_FIELD
from support.bridge import TOOL_NAMES, bridge_params
from support.raw_stdio import RawStdio
from support.servers import build_world, example_state

ANSWER_SECONDS = 60.0  # a hang guard only; the first answer waits for the bridge process to start
EXAMPLES = 150
LONG_EXAMPLES = int(os.environ.get("RIMTHAN_FUZZ_BRIDGE_ARGUMENTS", "10000"))
PARSE_ERROR = -32700


@dataclass
class Bridge:
    """A live ``rimthan-host serve`` (its verifier a child), driven by raw lines; its stderr in a file."""

    raw: RawStdio
    project: Path
    stderr: Path

    def __post_init__(self) -> None:
        self._ids = itertools.count(1)

    def call(self, tool: str, arguments_json: str) -> dict[str, Any]:
        """The answer for one call, which must come within ``ANSWER_SECONDS``."""
        request_id = next(self._ids)
        message = self.raw.call(request_id, tool, arguments_json, ANSWER_SECONDS)
        assert message is not None, f"no answer to {tool} {arguments_json[:200]} in {ANSWER_SECONDS} s"
        return message

    def result(self, tool: str, arguments: Any) -> dict[str, Any]:
        """A normal call's tool result (arguments as JSON)."""
        return self.result_of(tool, arguments)

    def result_of(self, tool: str, arguments: Any) -> dict[str, Any]:
        """The tool result of a call to ``tool``, any name (arguments as JSON)."""
        message = self.call(tool, json.dumps(arguments))
        result: dict[str, Any] = message["result"]
        return result

    def no_traceback(self) -> None:
        text = self.stderr.read_text("utf-8", errors="replace")
        assert "Traceback" not in text and "rimthan-host: error" not in text, text[-3000:]


@pytest.fixture(scope="module")
def bridge(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Bridge]:
    root = tmp_path_factory.mktemp("argument-values")
    project = root / "project"
    project.mkdir()
    params = bridge_params(project, build_world(root / "world"), root / "state")
    stderr = root / "stderr.txt"
    with stderr.open("wb") as errlog:
        process = subprocess.Popen(
            [params.command, *params.args], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=errlog
        )
        try:
            raw = RawStdio(process)
            raw.initialize(ANSWER_SECONDS)
            yield Bridge(raw, project, stderr)
        finally:
            process.terminate()
            process.wait(timeout=30)


def _text(result: dict[str, Any]) -> str:
    return "".join(str(c.get("text")) for c in result["content"])


def _nested(depth: int) -> str:
    return "[" * depth + "]" * depth


def _start(facts_json: str) -> str:
    return '{"workflow":"research","facts":' + facts_json + "}"


# (tool, raw arguments, the path and words the refusal names)
CASES = [
    pytest.param("start_run", _start('{"topic":NaN}'), "facts.topic = nan is not a finite number", id="nan"),
    pytest.param("start_run", _start('{"topic":1e999}'), "facts.topic = inf is not a finite number", id="1e999"),
    pytest.param("start_run", _start('{"topic":-Infinity}'), "facts.topic = -inf", id="-infinity"),
    pytest.param("start_run", _start('{"topic":"\\ud800"}'), "facts.topic holds a lone surrogate", id="surrogate"),
    pytest.param("start_run", _start('{"a":{"\\udc00":1}}'), "the key facts.a.\\udc00 holds a lone", id="key"),
    pytest.param("start_run", _start('{"t":[1,"x\\udfffy"]}'), "facts.t[1] holds a lone surrogate", id="in-list"),
    pytest.param(
        "start_run", _start('{"n":12345678901234567890123}'), "facts.n = 12345678901234567890123 is past", id="2**73"
    ),
    pytest.param("start_run", _start('{"n":9007199254740992}'), "facts.n = 9007199254740992 is past", id="2**53"),
    pytest.param("start_run", _start('{"n":-9007199254740992}'), "facts.n = -9007199254740992", id="-2**53"),
    pytest.param(
        "start_run",
        _start('{"deep":' + _nested(ARGUMENT_DEPTH - 1) + "}"),
        f"facts.deep nests objects/arrays deeper than {ARGUMENT_DEPTH - 2} levels",
        id="just-too-deep",
    ),
    pytest.param(
        "start_run", _start('{"deep":' + _nested(300) + "}"), "facts.deep nests objects/arrays", id="past-sdk-parser"
    ),
    pytest.param("start_run", '{"workflow":"\\ud800","facts":{}}', "workflow holds a lone surrogate", id="workflow"),
    pytest.param("start_run", '{"workflow":NaN,"facts":{}}', "workflow = nan", id="workflow-nan"),
    pytest.param("answer_question", '{"answer":"\\udbff"}', "answer holds a lone surrogate", id="answer"),
    pytest.param("record_verdict", '{"validator":"a\\ud800","verdict":"pass"}', "validator holds a", id="validator"),
    pytest.param(
        "record_verdict",
        '{"validator":"v","verdict":"fail","findings":["ok","\\ud800"]}',
        "findings[1] holds a lone surrogate",
        id="findings",
    ),
    pytest.param("record_verdict", '{"validator":"v","verdict":Infinity}', "verdict = inf", id="verdict"),
    pytest.param("resume_run", '{"run":"\\ud800"}', "run holds a lone surrogate", id="run"),
    pytest.param("migrate_run", '{"confirm":true,"to_release":"\\udc00"}', "to_release holds a", id="to_release"),
    pytest.param("migrate_run", '{"confirm":true,"facts":{"x":NaN}}', "facts.x = nan", id="migrate-facts"),
    pytest.param("show_step", '{"\\ud800":1}', "the key \\ud800 holds a lone surrogate", id="top-key"),
    pytest.param("step_done", '{"x":' + _nested(500) + "}", "x nests objects/arrays deeper than", id="step-done"),
]


@pytest.mark.parametrize(("tool", "arguments", "words"), CASES)
def test_a_value_the_protocol_cannot_carry_is_refused_naming_its_path(
    bridge: Bridge, tool: str, arguments: str, words: str
) -> None:
    result = bridge.call(tool, arguments)["result"]
    text = _text(result)
    assert result["isError"] is True, text
    structured = result["structuredContent"]
    assert structured[TEXT_FIELD] == text and structured["status"] == "bad_arguments", result
    assert text.startswith("Nothing was done: ") and words in text, text
    assert f"Call {tool} again with the arguments fixed" in text, text
    assert "unexpected" not in text
    assert _text(bridge.result("show_step", {})).startswith(("No run is active", "Run ")), "a normal call answered"
    bridge.no_traceback()


def test_nesting_at_the_bound_reaches_the_verifier_and_is_not_refused_for_its_depth(bridge: Bridge) -> None:
    """A fact nested exactly as deep as the bridge takes goes to the verifier, which takes its depth too."""
    result = bridge.call("start_run", _start('{"deep":' + _nested(ARGUMENT_DEPTH - 2) + "}"))["result"]
    text = _text(result)
    assert text.startswith("The verifier refused: confirmed_state_invalid:"), text  # the catalogue has no such fact
    assert "deeper than" not in text and "'deep' was unexpected" in text, text


def test_a_line_no_parser_reads_gets_a_parse_error_for_its_id_and_the_bridge_serves_on(bridge: Bridge) -> None:
    """Nesting past Python's parser too, a 5000-digit integer, a lone surrogate in the tool's name."""
    for tool, arguments in (
        ("start_run", _start('{"deep":' + _nested(5000) + "}")),
        ("start_run", _start('{"n":' + "9" * 5000 + "}")),
        ("show\ud800", "{}"),
    ):
        message = bridge.call(tool, arguments)
        assert message["error"]["code"] == PARSE_ERROR, message
        assert _text(bridge.result("show_step", {})).startswith(("No run is active", "Run "))
    bridge.no_traceback()


def test_an_unknown_tool_is_refused_quoting_its_name_cut(bridge: Bridge) -> None:
    """A 100,000-character tool name came back whole in the refusal; now its first characters and its length."""
    name = "x" * 100_000 + "\n"
    text = _text(bridge.result_of(name, {}))
    assert text.startswith("Unknown tool " + "x" * 100) and f"...[{len(name)} chars, cut]; the tools are " in text
    assert len(text) < 1000 and "\n" not in text, text[:2000]
    assert _text(bridge.result("show_step", {})).startswith(("No run is active", "Run "))


def _snapshot(project: Path) -> dict[str, bytes]:
    return {str(p.relative_to(project)): p.read_bytes() for p in sorted(project.rglob("*")) if p.is_file()}


def test_the_active_run_stays_where_it_is(bridge: Bridge) -> None:
    """With a run active, every tool refuses such values; its log, state and step are as they were."""
    facts = example_state("1.2.0")
    started = bridge.result("start_run", {"workflow": "research", "facts": facts, "new_run": True})
    assert not started["isError"], _text(started)
    run = started["structuredContent"]["run"]
    shown, files = _text(bridge.result("show_step", {})), _snapshot(bridge.project)
    assert f".rimthan/runs/{run}.log" in files
    for tool, arguments, _ in (case.values for case in CASES):
        result = bridge.call(str(tool), str(arguments))["result"]
        assert result["isError"] is True and _text(result).startswith("Nothing was done: ")
        assert _text(bridge.result("show_step", {})) == shown
    assert _snapshot(bridge.project) == files
    bridge.no_traceback()


# --------------------------------------------------------------------------- the fuzz

_ODD = st.sampled_from(
    [
        "NaN",
        "Infinity",
        "-Infinity",
        "1e999",
        "-1e999",
        "12345678901234567890123",
        str(2**53),
        str(-(2**53)),
        str(2**53 - 1),
        '"\\ud800"',
        '"\\udfff"',
        '"a\\udc00b"',
        '"\\ud83d\\ude00"',
        "-0.0",
        "1e-400",
        '"\\u0000"',
    ]
)
_SCALAR = (
    _ODD
    | st.integers().map(str)
    | st.floats(allow_nan=False, allow_infinity=False).map(json.dumps)
    | st.text(max_size=20).map(json.dumps)
    | st.sampled_from(["null", "true", "false"])
    | st.integers(min_value=1, max_value=400).map(_nested)
)
_KEY = st.text(max_size=10).map(json.dumps) | st.sampled_from(['"\\ud800"', '"k\\udfff"', '"topic"', '"answer"'])
_VALUE = st.recursive(
    _SCALAR,
    lambda inner: (
        st.lists(inner, max_size=4).map(lambda xs: "[" + ",".join(xs) + "]")
        | st.lists(st.tuples(_KEY, inner), max_size=4).map(lambda kv: "{" + ",".join(f"{k}:{v}" for k, v in kv) + "}")
    ),
    max_leaves=12,
)
_ARGUMENT_NAMES = sorted({name for tool in TOOLS for name in tool.input_schema["properties"]})


@st.composite
def raw_calls(draw: st.DrawFn) -> tuple[str, str]:
    """A bridge tool and raw JSON arguments: its own argument names and others, with any values."""
    tool = draw(st.sampled_from(TOOL_NAMES))
    keys = st.sampled_from(_ARGUMENT_NAMES).map(json.dumps) | _KEY
    pairs = draw(st.lists(st.tuples(keys, _VALUE), max_size=4))
    return tool, "{" + ",".join(f"{k}:{v}" for k, v in pairs) + "}"


def _fuzz_one(bridge: Bridge, call: tuple[str, str]) -> None:
    message = bridge.call(*call)
    if "error" in message:  # a line neither parser reads: a Parse error for its id
        assert message["error"]["code"] == PARSE_ERROR, message
    else:
        result = message["result"]
        # the bridge's words for a fault of its own ("unexpected" alone: a refusal quoting an argument so named)
        unexpected = f"The bridge failed on {call[0]} (an unexpected"
        assert unexpected not in _text(result) and result["structuredContent"].get("status") != "bridge_error"
        assert "Traceback" not in _text(result)
    assert "result" in bridge.call("show_step", "{}")  # the bridge still serves


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(call=raw_calls())
def test_any_arguments_to_any_tool_are_answered_and_never_unexpected(bridge: Bridge, call: tuple[str, str]) -> None:
    _fuzz_one(bridge, call)
    bridge.no_traceback()


@pytest.mark.long
@settings(max_examples=LONG_EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(call=raw_calls())
def test_long_any_arguments_to_any_tool_are_answered(bridge: Bridge, call: tuple[str, str]) -> None:
    """``make fuzz-long``: the same property over many more examples."""
    _fuzz_one(bridge, call)
    bridge.no_traceback()
