"""The Rimthan verifier MCP server.

A tool call goes ``transports`` -> ``server`` (``create_mcp_application``:
validate, route to the pinned release, ``_dispatch_tool``) ->
``workflow_engine.WorkflowEngineQueryModule`` (plain Python over the core) and
back. ``provider`` holds the verified releases, ``tool_contracts`` /
``contract_schemas`` the four closed contracts, ``cli`` the operator commands (``cli_check``, ``cli_keys``;
``cli_serve_options`` the option mistakes ``serve`` refuses).
"""
