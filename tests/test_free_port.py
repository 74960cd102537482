"""The ports the suite picks for a process to bind later are ones no other process is handed meanwhile.

``free_port`` gives a registry its port (bound once its process starts, and again after each restart of an
outage) and the fleet walkthrough its replica's (bound several commands later). It used to ask the kernel
(``bind(0)``), which hands the same ports to every server started with ``--port 0``: under ``make test`` the
other worker starts those all the time, so one could take the port in between and the registry died at its
bind ("the registry did not answer within 20 s", or a restart that never came back).
"""

from __future__ import annotations

import socket

from support.registry import EPHEMERAL_RANGE, free_port


def _kernel_picks() -> range:
    low, high = (int(n) for n in EPHEMERAL_RANGE.read_text("ascii").split())
    return range(low, high + 1)


def test_free_port_is_never_one_the_kernel_hands_to_a_server_on_port_0() -> None:
    picks = _kernel_picks()
    with socket.socket() as sock:  # what a server started with --port 0 gets: always in that range
        sock.bind(("127.0.0.1", 0))
        assert sock.getsockname()[1] in picks
    chosen = [free_port() for _ in range(50)]
    assert [port for port in chosen if port in picks] == [], chosen


def test_free_port_can_be_bound() -> None:
    port = free_port()
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", port))
        sock.listen()
