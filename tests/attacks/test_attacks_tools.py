"""Fuzzing the four tools through a real MCP client session over stdio.

One ``rimthan-mcp serve`` process (the installed entry point, with
``--release``, ``--migration-target``, ``--trust``, ``--checkpoint-keys`` and
``--state-dir``) is started for the module and driven by the official SDK
client. Hypothesis then sends each tool arguments that are valid JSON but wrong
in every way: real, valid arguments with one value replaced by a wrong type
(derived from the tool's own input schema), a required key removed, an unknown
key added, huge strings, deep nesting, unicode edge cases, huge numbers, or
random JSON altogether.

Every call must come back as a tool result: either a structured error
(``isError`` with ``{"error": {"code", "message"}}`` whose code is on the closed
list and is never ``internal_error``) or, where a mutation happened to stay
valid, a result with a status of that tool. After every example the session
must still serve a real call, and the server's log must hold no unexpected
failure. The default run is short (``FUZZ_EXAMPLES`` per tool and strategy);
``make fuzz-long`` runs the ``long`` variant with many more.
"""

from __future__ import annotations

import itertools
import json
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import anyio.from_thread
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mcp.client.stdio import StdioServerParameters, stdio_client
from rimthan_workflow_mcp.tool_contracts import workflow_engine_tool_contracts
from rimthan_workflow_mcp.tool_schemas import CONTINUE_STATUSES, PREPARE_STATUSES, START_STATUSES, SUBMIT_STATUSES
from rimthan_workflow_registry.errors import FailureCode
from support.checked_client import CheckedClient
from support.engines import StepKit, example_state
from support.json_edits import delete_at, pointers, set_at
from support.processes import serve_options
from support.raw_stdio import RawStdio, raw_stdio_server
from support.servers import ServerWorld, build_world, structured_error

FUZZ_EXAMPLES = 30
CALL_TIMEOUT_SECONDS = 60.0
RAW_ANSWER_SECONDS = 20.0
LONG_EXAMPLES = 600
# Nesting fuzzed through the SDK session. The SDK client refuses to serialise deeper than ~250 levels, and
# the SDK's stdio parser refuses a request nested deeper than ~200 (answered with a JSON-RPC Parse error by
# our stdio guard, see the raw test below), so the session fuzz stays under that; the raw test probes beyond it.
MAX_DEPTH = 150
CODES = {code.value for code in FailureCode}
STATUSES = {
    "rimthan.start_workflow": set(START_STATUSES),
    "rimthan.continue_workflow": set(CONTINUE_STATUSES),
    "rimthan.prepare_step_validation": set(PREPARE_STATUSES),
    "rimthan.submit_step_validation": set(SUBMIT_STATUSES),
}
TOOLS = tuple(STATUSES)
SCHEMAS = {c.name: c.input_schema for c in workflow_engine_tool_contracts()}


# --------------------------------------------------------------------------- the served session


@dataclass
class Served:
    """A live SDK client session to a ``rimthan-mcp serve`` subprocess, callable from sync code."""

    portal: anyio.from_thread.BlockingPortal
    client: CheckedClient
    errlog: Path
    valid: dict[str, dict[str, Any]]
    stats: dict[str, int] = field(default_factory=lambda: {"calls": 0, "errors": 0, "accepted": 0})

    def call(self, tool: str, arguments: Any) -> Any:
        """One ``tools/call``; an unanswered call fails the test (a dropped call) instead of hanging it."""
        self.stats["calls"] += 1
        try:
            return self.portal.call(
                partial(self.client.call_tool, tool, arguments, read_timeout_seconds=CALL_TIMEOUT_SECONDS)
            )
        except Exception as exc:
            shown = repr(arguments)
            raise AssertionError(
                f"{tool} got no tool result ({type(exc).__name__}: {exc}) for arguments "
                f"{shown[:600]}{'...' if len(shown) > 600 else ''}"
            ) from exc

    def check(self, tool: str, arguments: Any) -> None:
        """One fuzzed call: a structured error with a known code, or a well-formed result; never a crash."""
        result = self.call(tool, arguments)
        if result.is_error:
            self.stats["errors"] += 1
            error = structured_error(result)
            assert error["code"] in CODES, error
            assert error["code"] != FailureCode.INTERNAL_ERROR.value, error
            assert isinstance(error["message"], str) and error["message"]
        else:
            self.stats["accepted"] += 1
            assert result.structured_content["status"] in STATUSES[tool], result.structured_content

    def still_serves(self) -> None:
        result = self.call("rimthan.start_workflow", self.valid["rimthan.start_workflow"])
        assert not result.is_error and result.structured_content["status"] == "active"


def _rimthan_mcp() -> str:
    return str(Path(sys.executable).with_name("rimthan-mcp"))


def _valid_arguments(served: Served, kit: StepKit) -> dict[str, dict[str, Any]]:
    """Real, accepted arguments for each tool, taken from a real run at setup-workspace."""
    state = kit.confirm(example_state("1.2.0"))
    start = {"workflow": "research", "confirmed_state": state, "host": kit.host()}
    started = served.call("rimthan.start_workflow", start).structured_content
    checkpoint = started["checkpoint"]
    prepare = {
        "checkpoint": checkpoint,
        "confirmed_state": state,
        "host": kit.host(),
        "artifacts": kit.deliver_workspace(started["step"]),
    }
    ready = served.call("rimthan.prepare_step_validation", prepare).structured_content
    assert ready["status"] == "ready_for_semantic_validation", ready
    return {
        "rimthan.start_workflow": start,
        "rimthan.continue_workflow": {"checkpoint": checkpoint, "confirmed_state": state},
        "rimthan.prepare_step_validation": prepare,
        "rimthan.submit_step_validation": {
            "checkpoint": checkpoint,
            "confirmed_state": state,
            "validation_bundle": ready["validation_bundle"],
            "reports": [],
        },
    }


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    root = tmp_path_factory.mktemp("fuzz")
    world: ServerWorld = build_world(root)
    state_dir = root / "state"
    params = StdioServerParameters(
        command=_rimthan_mcp(),
        args=[
            "serve",
            *serve_options(world.built["1.2.0"], world.trust, state_dir, migration_target=world.built["1.3.0"]),
        ],
        env={"PYTHONUNBUFFERED": "1"},
    )
    errlog = root / "server-stderr.log"
    project = root / "project"
    project.mkdir()
    with (
        errlog.open("w") as err,
        anyio.from_thread.start_blocking_portal() as portal,
        portal.wrap_async_context_manager(CheckedClient(stdio_client(params, errlog=err), mode="legacy")) as client,
    ):
        served = Served(portal=portal, client=client, errlog=errlog, valid={})
        served.valid = _valid_arguments(served, StepKit(project))
        yield served
    log = errlog.read_text("utf-8")
    assert "Traceback" not in log and "tool failed unexpectedly" not in log, log[-4000:]


# --------------------------------------------------------------------------- strategies


NASTY_STRINGS = [
    "",
    " ",
    "\x00",
    "\x00" * 64,
    "\u202e\u2066evil\u2069",
    "\ufeff",
    "\u200b\u200d",
    "\uffff",
    "\U0010ffff",
    "e\u0301" * 50,
    "\U0001f4a3" * 100,
    "../../../../etc/passwd",
    "/etc/shadow",
    "C:\\Windows\\system32",
    "${jndi:ldap://x}",
    "'; DROP TABLE runs; --",
    "%s%s%n",
    "\r\n\r\nHTTP/1.1 200 OK",
    "null",
    "true",
    "{}",
    "[]",
    "sha256:" + "0" * 64,
    "sha256:" + "g" * 64,
    "eyJhbGciOiJub25lIn0.e30.",
    "a" * 70_000,
    "\u0085" * 10,
]
HUGE_NUMBERS = [2**53 + 1, -(2**63), 2**64, 10**30, -1, 0, 1.5, -0.0, 1e308, 5e-324, 253402300800]


def nested(depth: int, kind: str) -> Any:
    value: Any = "bottom"
    for _ in range(depth):
        value = [value] if kind == "list" else {"k": value}
    return value


def json_values(max_leaves: int = 12) -> st.SearchStrategy[Any]:
    scalars = (
        st.none()
        | st.booleans()
        | st.integers(-(2**70), 2**70)
        | st.floats(allow_nan=False, allow_infinity=False)
        | st.text(max_size=40)
    )
    return st.recursive(
        scalars,
        lambda inner: st.lists(inner, max_size=5) | st.dictionaries(st.text(max_size=12), inner, max_size=5),
        max_leaves=max_leaves,
    )


def nasty_values() -> st.SearchStrategy[Any]:
    return st.one_of(
        st.sampled_from(NASTY_STRINGS),
        st.sampled_from(HUGE_NUMBERS),
        st.text(min_size=1, max_size=200),  # arbitrary unicode (no lone surrogates: they are not Unicode)
        st.builds(nested, st.integers(20, MAX_DEPTH), st.sampled_from(["list", "dict"])),
        st.builds(lambda n: ["x"] * n, st.integers(1000, 20_000)),
        st.builds(lambda n: {f"k{i}": i for i in range(n)}, st.integers(300, 3000)),
        json_values(),
    )


def _schema_at(schema: dict[str, Any], path: tuple[Any, ...]) -> dict[str, Any] | None:
    """The sub-schema a location is validated against (``properties`` / ``items`` / ``additionalProperties``)."""
    current: Any = schema
    for part in path:
        if not isinstance(current, dict):
            return None
        if isinstance(part, int):
            current = current.get("items")
        else:
            properties = current.get("properties", {})
            current = properties.get(part, current.get("additionalProperties"))
    return current if isinstance(current, dict) else None


_OF_TYPE: dict[str, Any] = {
    "string": "text",
    "integer": 7,
    "number": 2.5,
    "boolean": True,
    "null": None,
    "array": ["x"],
    "object": {"x": 1},
}


def wrong_type_for(schema: dict[str, Any] | None) -> list[Any]:
    """Values of every JSON type the schema does not declare (derived from the tool's own input schema)."""
    if not schema:
        return []  # an unconstrained location (a confirmed-state value): no type is wrong there
    declared = schema.get("type")
    allowed = {declared} if isinstance(declared, str) else set(declared or [])
    if "number" in allowed:
        allowed.add("integer")
    if not allowed and schema and "enum" in schema:
        return ["not-in-enum", 12345, None]
    return [v for t, v in _OF_TYPE.items() if t not in allowed]


@st.composite
def mutated_arguments(draw: st.DrawFn, served: Served, tools: tuple[str, ...] = TOOLS) -> tuple[str, Any, str]:
    """(tool, arguments, how): a real call to one of ``tools`` broken in one way."""
    tool = draw(st.sampled_from(tools))
    base = served.valid[tool]
    schema = SCHEMAS[tool]
    locations = pointers(base)
    how = draw(
        st.sampled_from(["wrong_type", "nasty_value", "drop_key", "extra_key", "random_json", "wrong_container"])
    )
    if how == "wrong_type":
        typed = [p for p in locations if wrong_type_for(_schema_at(schema, p))]
        path = draw(st.sampled_from(typed))
        return tool, set_at(base, path, draw(st.sampled_from(wrong_type_for(_schema_at(schema, path))))), how
    if how == "nasty_value":
        path = draw(st.sampled_from(locations))
        return tool, set_at(base, path, draw(nasty_values())), how
    if how == "drop_key":
        keyed = [p for p in locations if isinstance(p[-1], str)]
        return tool, delete_at(base, draw(st.sampled_from(keyed))), how
    if how == "extra_key":
        objects = [()] + [p for p in locations if isinstance(_get(base, p), dict)]
        path = draw(st.sampled_from(objects))
        key = draw(st.text(min_size=1, max_size=30).filter(lambda k: k not in _get(base, path)))
        extended = set_at(base, (*path, key), draw(nasty_values())) if path else {**base, key: draw(nasty_values())}
        return tool, extended, how
    if how == "random_json":
        return (
            tool,
            draw(st.dictionaries(st.sampled_from([*base, "x", ""]) | st.text(max_size=20), json_values(), max_size=8)),
            how,
        )
    return tool, {k: draw(st.sampled_from([[v], {"v": v}, str(v)[:100]])) for k, v in base.items()}, how


def _get(value: Any, path: tuple[Any, ...]) -> Any:
    for part in path:
        value = value[part]
    return value


def _fuzz(served: Served, examples: int) -> None:
    @settings(
        max_examples=examples,
        deadline=None,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.large_base_example],
    )
    @given(case=mutated_arguments(served))
    def one(case: tuple[str, Any, str]) -> None:
        tool, arguments, _how = case
        served.check(tool, arguments)

    one()
    served.still_serves()


# --------------------------------------------------------------------------- tests


def test_the_valid_arguments_are_accepted(served: Served) -> None:
    """The control: unmutated, every tool call succeeds, so the refusals below are the mutations'."""
    for tool in TOOLS:
        result = served.call(tool, served.valid[tool])
        assert not result.is_error, result
        assert result.structured_content["status"] in STATUSES[tool]


@pytest.mark.long
@pytest.mark.parametrize("tool", TOOLS)
def test_each_tool_with_every_argument_of_every_wrong_type(served: Served, tool: str) -> None:
    """Exhaustive over the valid call's locations: each replaced by each JSON type its schema forbids."""
    base = served.valid[tool]
    tried = 0
    for path in pointers(base):
        for wrong in wrong_type_for(_schema_at(SCHEMAS[tool], path)):
            result = served.call(tool, set_at(base, path, wrong))
            assert result.is_error, (path, wrong)
            assert structured_error(result)["code"] in CODES - {FailureCode.INTERNAL_ERROR.value}
            tried += 1
    assert tried >= 10
    served.still_serves()


@pytest.mark.parametrize("tool", TOOLS)
def test_non_object_and_empty_arguments_are_refused(served: Served, tool: str) -> None:
    for arguments in ({}, {"": None}, {"checkpoint": None}, {"workflow": ["research"]}):
        result = served.call(tool, arguments)
        assert structured_error(result)["code"] == FailureCode.INVALID_ARGUMENTS.value
    unknown = served.call("rimthan.delete_everything", served.valid[tool])
    assert structured_error(unknown)["code"] == FailureCode.METHOD_NOT_FOUND.value
    served.still_serves()


def test_fuzzed_calls_get_structured_errors_and_the_session_keeps_serving(served: Served) -> None:
    _fuzz(served, FUZZ_EXAMPLES * len(TOOLS))
    assert served.stats["errors"] > 0


@pytest.mark.long
def test_fuzz_long(served: Served) -> None:
    """``make fuzz-long``: the same properties over many more examples."""
    _fuzz(served, LONG_EXAMPLES * len(TOOLS))
    print(
        f"\nfuzz-long: {served.stats['calls']} calls, {served.stats['errors']} structured errors, "
        f"{served.stats['accepted']} accepted (still-valid mutations), 0 crashes"
    )


def _raw_exchange(raw: RawStdio, calls: list[tuple[int, str]], grace: float) -> dict[int, dict[str, Any]]:
    """Write raw JSON-RPC ``tools/call`` lines and collect the answers by id.

    Calls are served concurrently, so answers may come in any order: reading
    stops once every id is answered, or a short grace period after the LAST
    call's answer (a request the server dropped never gets one).
    """
    for request_id, arguments_json in calls:
        raw.send(
            '{"jsonrpc":"2.0","id":' + str(request_id) + ',"method":"tools/call","params":{"name":'
            '"rimthan.start_workflow","arguments":' + arguments_json + "}}\n"
        )
    answers: dict[int, dict[str, Any]] = {}
    wanted, last = {i for i, _ in calls}, calls[-1][0]
    while not wanted <= set(answers):
        line = raw.next_line(grace if last in answers else RAW_ANSWER_SECONDS)
        if line is None:
            assert last in answers, f"the server stopped answering (answered so far: {sorted(answers)})"
            break
        message = json.loads(line)
        answers[message.get("id")] = message
    return answers


@pytest.fixture(scope="module")
def raw_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RawStdio]:
    """A second server over raw stdio (no SDK client), initialised by hand."""
    root = tmp_path_factory.mktemp("raw")
    world = build_world(root / "world")
    command = [_rimthan_mcp(), "serve", "--release", str(world.built["1.2.0"]), "--trust", str(world.trust)]
    with raw_stdio_server([*command, "--state-dir", str(root / "state")], RAW_ANSWER_SECONDS) as raw:
        yield raw


_RAW_IDS = itertools.count(100)
RAW_CASES = [
    pytest.param('{"workflow":"a\u2028b\u0085c"}', id="raw-line-separators"),
    pytest.param('{"workflow":"' + "x" * 4_000_000 + '"}', id="4MB-string"),
    pytest.param('{"workflow":"\\u0000"}', id="nul-escape"),
    pytest.param('{"workflow":1e999}', id="float-overflow"),
    pytest.param('{"workflow":NaN}', id="nan-literal"),
    pytest.param('{"workflow":123456789012345678901234567890}', id="30-digit-integer"),
    pytest.param('{"workflow":"\\ud800"}', id="lone-surrogate-escape"),
    pytest.param('{"confirmed_state":{"state":{"a":' + "9" * 5000 + "}}}", id="5000-digit-integer"),
    pytest.param('{"workflow":' + "[" * 5000 + "]" * 5000 + "}", id="nested-5000-deep"),
]


@pytest.mark.parametrize("arguments", RAW_CASES)
def test_raw_requests_the_sdk_client_would_never_send_are_answered(raw_server: RawStdio, arguments: str) -> None:
    """Raw stdio bytes: every request gets an answer for its id (a structured error), and the server serves on."""
    ids = next(_RAW_IDS), next(_RAW_IDS)
    answers = _raw_exchange(raw_server, [(ids[0], arguments), (ids[1], '{"workflow":"x"}')], RAW_ANSWER_SECONDS)
    assert ids[1] in answers  # the session survives whatever came before
    assert ids[0] in answers, "no answer at all"
    message = answers[ids[0]]
    assert "result" in message or "error" in message
    if "error" in message:  # what the SDK's parser refuses: a JSON-RPC Parse error for this very id
        assert message["error"]["code"] == -32700 and message["id"] == ids[0]
    if "result" in message:
        assert message["result"]["isError"] is True
        assert message["result"]["structuredContent"]["error"]["code"] in CODES - {"internal_error"}


def test_an_unknown_tool_is_refused_quoting_its_name_cut(raw_server: RawStdio) -> None:
    """A 100,000-character tool name came back whole in the refusal; now its first characters and its length."""
    name = "rimthan." + "x" * 100_000
    message = raw_server.call(next(_RAW_IDS), name, "{}", RAW_ANSWER_SECONDS)
    assert message is not None, "no answer"
    error = message["result"]["structuredContent"]["error"]
    assert error["code"] == "method_not_found", error
    assert error["message"].startswith("no tool 'rimthan.xxx") and f"...[{len(name)} chars, cut]'" in error["message"]
    assert len(json.dumps(message)) < 2000, json.dumps(message)[:3000]


def test_final_real_call_succeeds_after_all_the_fuzzing(served: Served) -> None:
    served.still_serves()
    print(
        f"\nfuzz: {served.stats['calls']} calls, {served.stats['errors']} structured errors, "
        f"{served.stats['accepted']} accepted (still-valid mutations), 0 crashes"
    )
