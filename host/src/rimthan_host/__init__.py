"""rimthan-host: the host side of the four-tool protocol, done by code.

Depends on the domain core (``rimthan_workflow_registry``) and the MCP SDK's
client only, never on the server's internals.

``harness``
    The scripted harness: a host session that drives one run through the four
    tools (confirmations, asset delivery, output attestation, validator reports).
``demo``
    ``make demo``: a real SDK client starts ``rimthan-mcp serve`` over stdio and
    walks the packaged workflow through the harness.
"""
