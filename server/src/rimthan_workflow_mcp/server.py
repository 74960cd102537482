"""The verifier MCP server: four workflow tools over verified releases.

``create_mcp_application`` is the transport trace point: it builds the SDK's
low-level ``Server`` with the tool and resource handlers, and every transport
(stdio, Streamable HTTP) serves exactly that object. This module is a thin
adapter: the workflow rules live in ``WorkflowEngineQueryModule``; what this
adds is what the SDK leaves to us - validating arguments and results against
the declared schemas (compiled once), routing a checkpoint to the release it
is pinned to, and turning every refusal into a structured tool error so no
traceback ever reaches a client. Which release serves a call is worked out in
:mod:`.call_routing`, the migration offer a result carries in
:mod:`.migration_offers`, and the log notification per call in :mod:`.call_notices`.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import anyio.to_thread
import mcp_types as types
from mcp.server import Server, ServerRequestContext
from mcp.server.caching import CacheableMethod, CacheHint
from mcp.shared.inbound import x_mcp_header_map
from rimthan_workflow_registry.canonical import canonical_text
from rimthan_workflow_registry.errors import FailureCode, RegistryError, quoted
from rimthan_workflow_registry.installed_version import installed_version
from rimthan_workflow_registry.limits import MAX_ARGUMENT_DEPTH, depth_exceeds, too_deep_message
from rimthan_workflow_registry.protocol_names import WORKFLOW_ENGINE_PROFILE
from rimthan_workflow_registry.remediation import harness_next_step

from .call_notices import notify_call
from .call_placement import CallPlacement
from .call_record import log_call
from .call_reply import wire_reply
from .call_routing import route
from .call_scope import one_call
from .contract_checks import check_contract_schema, without_checked
from .eras import negotiate_served_era
from .list_changed import ListingServer, ListingWatch
from .logs import get_logger
from .migration_offers import offer_arguments, with_migration_offer
from .prompts import PromptCatalogue
from .provider import LoadedRelease, ReleaseProvider
from .request_envelope import check_envelope
from .resources import ResourceCatalogue
from .schema_validation import CompiledSchema, CompiledSchemas
from .tool_contracts import (
    CONTINUE_WORKFLOW,
    ToolContract,
    contract_documents,
    workflow_engine_tool_contracts,
)

if TYPE_CHECKING:
    from .results import ToolResult

SERVER_NAME = "rimthan-workflow-mcp"
MIGRATION_ARGUMENT = "migration"
INSTRUCTIONS = (
    "Rimthan serves signed workflow releases through four tools. Call rimthan.start_workflow, then follow each "
    "returned step: continue_workflow for ungated steps and questions, prepare_step_validation with the step's "
    "artifacts, run the returned validators as your own subagents, and submit_step_validation with their reports. "
    "Send the checkpoint token exactly as returned. Step assets are readable as immutable resources."
)
# Tool definitions never change while the process runs, but they are the caller's own view: never shared.
CACHE_HINTS: dict[CacheableMethod, CacheHint] = {
    "tools/list": CacheHint(ttl_ms=0, scope="private"),
    "resources/list": CacheHint(ttl_ms=0, scope="private"),
    "resources/templates/list": CacheHint(ttl_ms=0, scope="private"),
    "prompts/list": CacheHint(ttl_ms=0, scope="private"),
}
_log = get_logger("server")


@dataclass(frozen=True)
class RuntimeState:
    """Everything a call needs, built once: contracts, compiled validators, SDK tool records."""

    provider: ReleaseProvider
    profile: str
    contracts: Mapping[str, ToolContract]
    tools: tuple[types.Tool, ...]
    input_validators: Mapping[str, CompiledSchema]
    output_validators: Mapping[str, CompiledSchema]
    resources: ResourceCatalogue
    prompts: PromptCatalogue


def runtime_state(provider: ReleaseProvider) -> RuntimeState:
    """What ``create_mcp_application`` serves for ``provider``, for callers outside this adapter.

    The CLI's pre-flight, tests and benchmarks use it to check that a
    release can be served, or to call :func:`call_tool` without a transport.
    """
    return _build_runtime_state(provider)


def _build_runtime_state(provider: ReleaseProvider) -> RuntimeState:
    """Select the query module and contracts for the active release's profile (only ``workflow-engine``)."""
    profile = provider.active.profile
    for active in provider.actives.values():
        if active.profile != WORKFLOW_ENGINE_PROFILE:
            raise RegistryError(
                FailureCode.SCOPE_MISMATCH,
                f"release profile {active.profile!r} is not served; this server serves {WORKFLOW_ENGINE_PROFILE!r}",
                path=str(active.release.root),
            )
    contracts = workflow_engine_tool_contracts()
    documents = contract_documents()
    for name, document in documents.items():
        check_contract_schema(document, f"contract {name}")
    tools: list[types.Tool] = []
    for contract in contracts:
        check_contract_schema(without_checked(contract.input_schema, documents), f"{contract.name} input schema")
        check_contract_schema(without_checked(contract.output_schema, documents), f"{contract.name} output schema")
        tools.append(_tool_record(contract))
    return RuntimeState(
        provider=provider,
        profile=profile,
        contracts={c.name: c for c in contracts},
        tools=tuple(tools),
        input_validators=CompiledSchemas({c.name: c.input_schema for c in contracts}),
        output_validators=CompiledSchemas({c.name: c.output_schema for c in contracts}),
        resources=ResourceCatalogue(provider, documents),
        prompts=PromptCatalogue(provider),
    )


def _tool_record(contract: ToolContract) -> types.Tool:
    tool = types.Tool.model_validate(contract.definition(), by_name=False)
    hints = tool.annotations
    if (
        hints is None
        or hints.read_only_hint is not contract.read_only
        or hints.idempotent_hint is not contract.idempotent
    ):
        raise RegistryError(
            FailureCode.INTERNAL_ERROR, f"{contract.name}: annotations disagree with the contract's mutability markers"
        )
    return tool


# --------------------------------------------------------------------------- the application


def create_mcp_application(
    provider: ReleaseProvider,
    *,
    name: str = SERVER_NAME,
    calls_on_loop: bool = False,
    watch: ListingWatch | None = None,
) -> Server[Any]:
    """The SDK low-level server for ``provider``; every transport serves this object.

    ``calls_on_loop`` (stdio: one client, answered in order) runs every ``tools/call``
    on the event loop; over HTTP only those :class:`CallPlacement` finds small and
    bounded do, the others run in a worker thread. ``watch``: clients told when a refresh changes the
    listings, and that declared, per era (list_changed.py); without it no list change is declared.
    """
    state = _build_runtime_state(provider)
    placement = CallPlacement(provider)

    async def on_list_tools(
        ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return types.ListToolsResult(tools=list(state.tools))

    # The level a handshake-era client asked for with logging/setLevel; None until it asks (nothing is sent).
    # One process serves one stdio client; HTTP answers in plain JSON, which carries no notifications.
    log_threshold: list[str | None] = [None]

    async def on_call_tool(ctx: ServerRequestContext[Any], params: types.CallToolRequestParams) -> dict[str, Any]:
        check_envelope(ctx.request_id, params.meta)
        arguments = dict(params.arguments or {})
        on_loop = calls_on_loop or placement.on_loop(ctx.request, arguments)
        _log.debug("tool call placed", extra={"tool": params.name, "runs_on": "loop" if on_loop else "worker"})
        if on_loop:
            result = call_tool(state, params.name, arguments)
        else:
            result = await anyio.to_thread.run_sync(call_tool, state, params.name, arguments)
        log_call(params.name, arguments, result)
        await notify_call(ctx, log_threshold[0], params.name, result)
        return wire_reply(result)  # the dict the SDK's dump of the model would give (call_reply.py)

    async def on_set_logging_level(
        ctx: ServerRequestContext[Any], params: types.SetLevelRequestParams
    ) -> types.EmptyResult:
        log_threshold[0] = params.level
        return types.EmptyResult()

    async def on_list_resources(
        ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListResourcesResult:
        page = state.resources.list_page(None if params is None else params.cursor)
        _log.debug("resources listed", extra={"resources": len(page.resources)})  # (a harness's reads, at debug)
        return page

    async def on_list_resource_templates(
        ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListResourceTemplatesResult:
        return types.ListResourceTemplatesResult(resource_templates=state.resources.list_templates())

    async def on_read_resource(
        ctx: ServerRequestContext[Any], params: types.ReadResourceRequestParams
    ) -> types.ReadResourceResult:
        return await anyio.to_thread.run_sync(state.resources.read, str(params.uri))

    async def on_list_prompts(
        ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListPromptsResult:
        return types.ListPromptsResult(prompts=await anyio.to_thread.run_sync(state.prompts.list_prompts))

    async def on_get_prompt(
        ctx: ServerRequestContext[Any], params: types.GetPromptRequestParams
    ) -> types.GetPromptResult:
        return await anyio.to_thread.run_sync(state.prompts.get, params.name, params.arguments)

    header_schemas = param_header_schemas(state.contracts)

    def input_schema(tool_name: str) -> Mapping[str, Any] | None:
        return header_schemas.get(tool_name)

    app = ListingServer(
        name,
        version=installed_version(SERVER_NAME),  # the server is named as its distribution
        title="Rimthan verifier",
        instructions=INSTRUCTIONS,
        cache_hints=CACHE_HINTS,
        get_tool_input_schema=input_schema,
        on_list_tools=on_list_tools,
        on_list_resources=on_list_resources,
        on_list_resource_templates=on_list_resource_templates,
        on_read_resource=on_read_resource,
        on_list_prompts=on_list_prompts,
        on_get_prompt=on_get_prompt,
        on_set_logging_level=on_set_logging_level,
        on_subscriptions_listen=None if watch is None else watch.listen,
    )
    app.add_request_handler("tools/call", types.CallToolRequestParams, on_call_tool)  # a handler returning a dict
    app.middleware.append(negotiate_served_era)  # a batch-era offer answered with a served version (eras.py)
    if watch is not None:
        watch.attach(app)
    return app


def param_header_schemas(contracts: Mapping[str, ToolContract]) -> dict[str, Mapping[str, Any]]:
    """The input schemas the SDK checks a call's ``Mcp-Param-*`` headers against: those declaring a header.

    On the 2026-07-28 HTTP path the SDK asks ``get_tool_input_schema`` for the
    called tool's schema before every call and walks all of it twice for
    ``x-mcp-header`` annotations; ``None`` is the hook's answer for "nothing to
    validate". None of the four tools declares a header, so no schema is walked
    (the outcome is the same: with no annotation the SDK accepts any headers).
    """
    return {name: c.input_schema for name, c in contracts.items() if x_mcp_header_map(c.input_schema)}


# --------------------------------------------------------------------------- tools/call


def call_tool(state: RuntimeState, name: str, arguments: dict[str, Any]) -> types.CallToolResult:
    """One ``tools/call``: validate, route, dispatch, validate the result. Never raises."""
    started = time.perf_counter()
    try:
        contract = state.contracts.get(name)
        if contract is None:
            raise RegistryError(
                FailureCode.METHOD_NOT_FOUND, f"no tool '{quoted(name)}'; this server has {', '.join(state.contracts)}"
            )
        if depth_exceeds(arguments, MAX_ARGUMENT_DEPTH):
            raise RegistryError(FailureCode.INVALID_ARGUMENTS, too_deep_message("arguments", MAX_ARGUMENT_DEPTH))
        _validate_instance(
            state.input_validators[name], arguments, code=FailureCode.INVALID_ARGUMENTS, what="arguments"
        )
        with one_call():
            source = route(state.provider, contract, arguments)
            result = _check_result(state, name, _dispatch_tool(state, source, name, arguments))
            # The release-constant parts of a step payload are serialised once per process (rfc8785 still
            # produces every byte); results carrying no kept part are serialised whole.
            text = source.module.step_payloads.canonical.dumps(result).decode("utf-8")
    except RegistryError as exc:
        _log.info(
            "tool refused",
            extra={"tool": name, "code": exc.code.value, "ms": round((time.perf_counter() - started) * 1000, 1)},
        )
        return domain_tool_error(exc)
    except Exception:
        _log.exception("tool failed unexpectedly", extra={"tool": name})
        return domain_tool_error(
            RegistryError(FailureCode.INTERNAL_ERROR, "the server failed unexpectedly; the error was logged")
        )
    if _log.isEnabledFor(logging.DEBUG):  # the record's fields are not built on every call when debug is off
        ms = round((time.perf_counter() - started) * 1000, 1)
        _log.debug("tool served", extra={"tool": name, "status": result.get("status"), "ms": ms})
    return types.CallToolResult(content=[types.TextContent(text=text)], structured_content=result, is_error=False)


def _validate_instance(validator: CompiledSchema, instance: Any, *, code: FailureCode, what: str) -> None:
    """Raise ``RegistryError(code)`` naming the JSON pointer of the most relevant schema violation."""
    problem = validator.problem(instance)
    if problem is None:
        return
    raise RegistryError(
        code,
        f"{what} at {problem.pointer or '/'}: {problem.message}",
        path=problem.pointer or "/",
        details={"pointer": problem.pointer, "schema_path": problem.schema_path},
    )


def _check_result(state: RuntimeState, name: str, result: object) -> dict[str, Any]:
    """The wire form of ``result``, checked against the declared output schema.

    A result that is not a :class:`ToolResult` or falls outside the schema is a
    server bug: log it, never send it.
    """
    from .results import ToolResult  # what tool calls use is imported by the first call, not at start

    try:
        if not isinstance(result, ToolResult):
            raise RegistryError(FailureCode.INTERNAL_ERROR, f"{type(result).__name__} is not a ToolResult")
        wire = result.to_json()
        _validate_instance(state.output_validators[name], wire, code=FailureCode.INTERNAL_ERROR, what=f"{name} result")
        return wire
    except RegistryError as exc:
        _log.error("result violates the output schema", extra={"tool": name, "problem": exc.message})
        raise RegistryError(
            FailureCode.INTERNAL_ERROR,
            "the server produced a result outside this tool's output schema; it was logged and not sent",
        ) from None


def _dispatch_tool(state: RuntimeState, source: LoadedRelease, name: str, arguments: dict[str, Any]) -> ToolResult:
    """Map exactly the four tool names, through their contracts, to the module methods that implement them."""
    contract = state.contracts.get(name)
    if contract is None:
        raise RegistryError(FailureCode.METHOD_NOT_FOUND, f"no tool '{quoted(name)}'")
    if name == CONTINUE_WORKFLOW and MIGRATION_ARGUMENT in arguments:
        return _dispatch_migration(state, source, arguments)
    result = contract.bound(source.module)(arguments)
    return with_migration_offer(state.provider, source, offer_arguments(name, arguments, result), result)


def _dispatch_migration(state: RuntimeState, source: LoadedRelease, arguments: dict[str, Any]) -> ToolResult:
    """Explicit migration to the separately verified target: the one given at start, or (when the
    operator enabled it) the newest verified release of the run's catalogue."""
    target = state.provider.migration_target_for(source)
    if target is None:
        raise RegistryError(
            FailureCode.MIGRATION_UNAVAILABLE,
            f"this server offers no migration target for {source.release.release_id} (none was given with "
            "--migration-target, or --migrate-to-newest is off or no newer release of its catalogue verified); "
            "continue on the pinned release or ask the operator",
        )
    from .workflow_engine import WorkflowEngineQueryModule

    return WorkflowEngineQueryModule.migrate_workflow(source.module, target.module, arguments)


def domain_tool_error(exc: RegistryError) -> types.CallToolResult:
    """A refusal as an ``isError`` tool result: ``{"error": {code, message, next, ...}}`` as text and structured.

    ``next`` is what to do (the refusal's own step, else the code's line of the one remediation table, or its
    line for a harness where the table's is an operator's: ``remediation.harness_next_step``).
    """
    error = {**exc.to_dict(), "next": harness_next_step(exc)}
    try:
        text = canonical_text({"error": error})
    except Exception:  # details that are not JSON: keep the code, message and next step only
        error = {"code": exc.code.value, "message": exc.message, "next": error["next"]}
        text = canonical_text({"error": error})
    return types.CallToolResult(
        content=[types.TextContent(text=text)], structured_content={"error": error}, is_error=True
    )
