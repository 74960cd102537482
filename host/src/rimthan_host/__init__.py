"""rimthan-host: the host side of the four-tool protocol, done by code.

Depends on the domain core (``rimthan_workflow_registry``) and the MCP SDK
only, never on the server's internals. See docs/host-kit.md.

``protocol``       tool names, the :data:`ToolCaller` seam, refusals, the host profile
``confirmations``  confirmed state: value digests, confirmation times, how the person confirmed
``files``          symlink-free writes and readback; output attestations from disk
``workspace``      setup: asset delivery checked against pins, the workspace manifest
``reports``        validator reports bound to the instruction and the artifacts
``runlog``         ``.rimthan/runs/<run>.log`` (what ``rimthan-mcp audit`` verifies) and resume state
``session``        :class:`HostSession`: one run's protocol moves (the one host implementation)
``harness``        the scripted harness: a session driven by a scenario (tests, demo, load, benchmarks)
``demo``           ``make demo``: a real SDK client walks the packaged workflow through the harness
"""
