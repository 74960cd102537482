"""The ``layered`` instrument of ``wrapped_serving.py``: each layer of an HTTP call inside its own C function.

For :mod:`.p3_server_callgrind` (``--layers``, with ``--transport http``):
callgrind sees C functions, not Python ones, so each layer of a served call
runs here inside a C-level trampoline nothing else on the path calls, and a
marker's inclusive instructions in a call's dump are that layer's
(``LAYERS``: the marker's symbol -> the layer). A coroutine's every step
(``send``/``throw``) runs inside its marker, so an ``async`` layer is counted
across its awaits: ``app`` is our ASGI wrappers with all they call (``http_cors``,
``http_stop``, ``http_bounds``, ``http_shape``), ``starlette`` the SDK's
Starlette application they wrap, ``send``/``receive`` what the SDK's
``send``/``receive`` cost (our wrappers of them and uvicorn's), ``uvicorn
send``/``uvicorn receive`` uvicorn's own (h11's write); ``manager`` the SDK's
session manager's dispatch of one request (its era routing and the
transport's path), ``write`` its 2026-07-28 reply's encoding and sending
(``_write``), ``call_tool`` our handler (as ``reduced_serving.py``). What no
marker holds is uvicorn's protocol (h11's parse of the request, the ASGI
task), asyncio's loop and the idle wait. At exit it writes the calls it
wrapped.
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Awaitable, Callable, Generator
from typing import Any

Step = tuple[str, Any]  # ("yield", value) | ("return", value) | ("raise", exception)
Runner = Callable[[Callable[[], Step]], Step]


def _by_reduce(thunk: Callable[[], Step]) -> Step:
    return functools.reduce(lambda _acc, _i: thunk(), (0,), ("return", None))


def _by_starmap(thunk: Callable[[], Step]) -> Step:
    return next(itertools.starmap(thunk, ((),)))


def _by_accumulate(thunk: Callable[[], Step]) -> Step:
    return list(itertools.accumulate((None, None), lambda _a, _b: thunk()))[-1]


def _kept(thunk: Callable[[], Step], into: list[Step]) -> bool:
    into.append(thunk())
    return False


def _by_filterfalse(thunk: Callable[[], Step]) -> Step:
    got: list[Step] = []
    next(itertools.filterfalse(lambda _: _kept(thunk, got), (0,)))
    return got[0]


def _by_dropwhile(thunk: Callable[[], Step]) -> Step:
    got: list[Step] = []
    next(itertools.dropwhile(lambda _: _kept(thunk, got), (0,)))
    return got[0]


def _by_takewhile(thunk: Callable[[], Step]) -> Step:
    got: list[Step] = []
    next(itertools.takewhile(lambda _: not _kept(thunk, got), (0,)))
    return got[0]


def _by_calliter(thunk: Callable[[], Step]) -> Step:
    return next(iter(thunk, None))


def _by_cmp_to_key(thunk: Callable[[], Step]) -> Step:
    got: list[Step] = []
    key = functools.cmp_to_key(lambda _a, _b: int(_kept(thunk, got)))
    _ = key(0) < key(1)
    return got[0]


def _by_groupby(thunk: Callable[[], Step]) -> Step:
    return next(itertools.groupby((0,), key=lambda _: thunk()))[0]


# The marker's symbol in callgrind_annotate -> (the layer, its runner)
LAYERS: dict[str, tuple[str, Runner]] = {
    "starmap_next": ("app", _by_starmap),
    "accumulate_next": ("starlette", _by_accumulate),
    "filterfalse_next": ("send", _by_filterfalse),
    "dropwhile_next": ("receive", _by_dropwhile),
    "calliter_iternext": ("uvicorn send", _by_calliter),
    "takewhile_next": ("uvicorn receive", _by_takewhile),
    "groupby_next": ("manager", _by_groupby),
    "keyobject_richcompare": ("write", _by_cmp_to_key),
    "functools_reduce": ("call_tool", _by_reduce),
}


def split(total: int, by_symbol: dict[str, int]) -> dict[str, int]:
    """One call's ``total`` instructions in parts, from its markers' inclusive counts (``by_symbol``).

    The parts add up to ``total``; each marker's own steps are counted in the layer around it.
    """
    layer = {LAYERS[symbol][0]: count for symbol, count in by_symbol.items()}
    sdk = layer["manager"] - layer["call_tool"] - layer["write"] - layer["receive"]
    return {
        "uvicorn protocol, asyncio loop (h11 parse)": total - layer["app"],
        "uvicorn send and receive (h11 write)": layer["uvicorn send"] + layer["uvicorn receive"],
        "ours: http_* wrappers": layer["app"] - layer["starlette"],
        "ours: send/receive wrappers": layer["send"]
        - layer["uvicorn send"]
        + layer["receive"]
        - layer["uvicorn receive"],
        "Starlette, body-limit middleware": layer["starlette"] - layer["manager"],
        "SDK transport path (routing, parse, checks)": sdk,
        "SDK reply encoding (_write)": layer["write"] - layer["send"],
        "call_tool": layer["call_tool"],
    }


def _runner(layer: str) -> Runner:
    return next(run for name, run in LAYERS.values() if name == layer)


class _Marked:
    """Await ``coro`` with each of its steps run by ``run``: the layer's instructions inside the marker."""

    def __init__(self, coro: Awaitable[Any], run: Runner) -> None:
        self._coro: Any = coro.__await__()
        self._run = run

    def _step(self, value: Any, error: BaseException | None) -> Step:
        try:
            got = self._coro.throw(error) if error is not None else self._coro.send(value)
        except StopIteration as stop:
            return ("return", stop.value)
        except BaseException as exc:  # noqa: BLE001 - carried out of the C trampoline, raised below
            return ("raise", exc)
        return ("yield", got)

    def __await__(self) -> Generator[Any, Any, Any]:
        value: Any = None
        error: BaseException | None = None
        while True:
            kind, got = self._run(functools.partial(self._step, value, error))
            if kind == "return":
                return got
            if kind == "raise":
                raise got
            try:
                value, error = (yield got), None
            except BaseException as exc:  # noqa: BLE001 - thrown into the layer at its next step
                value, error = None, exc


def marked(layer: str, fn: Callable[..., Awaitable[Any]]) -> Callable[..., Awaitable[Any]]:
    """``fn`` (a coroutine function) with each call counted under ``layer``'s marker."""
    run = _runner(layer)

    async def counted(*args: Any, **kwargs: Any) -> Any:
        return await _Marked(fn(*args, **kwargs), run)

    return counted


def marked_app(layer: str, app: Any, send_layer: str, receive_layer: str) -> Callable[..., Awaitable[Any]]:
    """An ASGI ``app`` counted under ``layer``, the ``send`` and ``receive`` it is given under their own."""
    run = _runner(layer)

    async def counted(scope: Any, receive: Any, send: Any) -> Any:
        inner = app(scope, marked(receive_layer, receive), marked(send_layer, send))
        return await _Marked(inner, run)

    return counted


def _layer_http(counts: dict[str, int]) -> None:
    import mcp.server._streamable_http_modern as modern
    import mcp.server.streamable_http_manager as manager
    import rimthan_workflow_mcp.http_transport as transport
    import rimthan_workflow_mcp.server as server
    from rimthan_workflow_mcp.http_bounds import BoundedRequests as bounded
    from rimthan_workflow_mcp.http_cors import CrossOrigin as outermost

    def cross_origin(app: Any, *args: Any) -> Any:
        return marked_app("app", outermost(app, *args), "uvicorn send", "uvicorn receive")

    def bounded_requests(app: Any, **kwargs: Any) -> Any:
        return bounded(marked_app("starlette", app, "send", "receive"), **kwargs)

    served, run = server.call_tool, _runner("call_tool")

    def reduced(state: Any, name: str, arguments: dict[str, Any]) -> Any:
        counts["calls"] += 1
        return run(lambda: ("return", served(state, name, arguments)))[1]

    session_manager = manager.StreamableHTTPSessionManager
    for owner, name, replacement in (
        (transport, "CrossOrigin", cross_origin),
        (transport, "BoundedRequests", bounded_requests),
        (session_manager, "_handle_request", marked("manager", session_manager._handle_request)),
        (modern, "_write", marked("write", modern._write)),
        (server, "call_tool", reduced),  # on_call_tool looks the module global up on every call
    ):
        setattr(owner, name, replacement)


def instrument(module: str) -> dict[str, int]:
    counts = {"calls": 0}
    if module == "rimthan_workflow_mcp":
        _layer_http(counts)
    return counts
