"""The Rimthan verifier MCP server.

A tool call goes ``stdio_transport`` or ``http_transport`` -> ``server`` (:func:`create_mcp_application`:
validate, route to the pinned release, ``_dispatch_tool``) ->
``workflow_engine.WorkflowEngineQueryModule`` (plain Python over the core) and
back.

The wire:

``stdio_transport``   serving over stdio: one client on stdin/stdout, the refresh triggers beside it
``http_transport``    serving over Streamable HTTP (stateless, or with sessions): bind, listen, drain at SIGTERM
``refresh_triggers``  what triggers a refresh while serving (SIGHUP, an interval), run off the event loop
``stdio_serve``       one MCP server on the project's stdio wire (the verifier's, and the host bridge's)
``stdio_pipes``       that wire read and written on the event loop, without the SDK's hops to a thread
``stdio_guard``       every stdio line the SDK's parser refuses answered, not dropped
``stdio_drain``       at the end of stdin, every request read before it answered before the server exits
``message_shape``     what a JSON-RPC message's text holds, read without parsing it, and the messages MCP refuses
``eras``              a client offering a batch-era protocol revision answered with one that has no batches
``http_shape``        HTTP: a body that is no single JSON-RPC message gets a readable ``Invalid Request``
``http_bounds``       HTTP: deadlines for a request's head and body, and a bound on the requests in flight
``http_cors``         HTTP: CORS (a preflight, the headers a browser needs) for the origins the protection accepts
``http_stop``         HTTP: a call the stop's drain cut off answered ``Connection closed`` (503), not a bare 500
``session_room``      HTTP sessions: only an initialize opens one; the longest idle closed at the cap; one id in flight
``request_envelope``  bounds on what a ``tools/call`` carries besides its arguments (its id, its ``_meta``)
``call_placement``    HTTP: a small, bounded call run on the event loop, any other in a worker thread
``call_reply``        a ``tools/call`` reply handed to the SDK as the dict its model dumps to (one dump fewer)
``port_claims``       Linux: one server per TCP port (and overlapping address) at start, bound but not listening
``health``            ``GET /healthz``: what a load balancer asks a replica before sending it calls

The server and its tools:

``server``            the SDK's low-level server: tools, resources and prompts over the held releases
``tool_contracts``    the four tool contracts: names, schemas, mutability markers, the engine method each calls
``contract_schemas``  the JSON Schema documents of what a harness sends (Draft 2020-12, all closed)
``result_contracts``  the contracts the tools answer with: a step, a question, a failure, a preview, a refusal
``schema_parts``      the building blocks of every contract and tool schema (closed objects, bounded strings)
``tool_schemas``      each tool's input and output schema, built from the contract documents
``contract_checks``   the contracts' own schemas checked once at start-up (a bad one fails the start)
``schema_validation`` a tool's schema compiled once: a fast verdict on every call, the same refusal
``call_scope``        what one ``tools/call`` works out once: its resumed run
``call_routing``      which held release serves a call: the checkpoint's pinned one (its MAC checked first)
``call_record``       one operator's log line per tool call: the audit trail of which runs used which release
``call_notices``      the ``notifications/message`` a client gets per tool call: served or refused, no state
``rpc_errors``        a refused resource or prompt read as a JSON-RPC error, its code and next step in its data
``resources``         immutable MCP resources: the tool contracts and every held release's files
``resource_pages``    ``resources/list`` in pages: manifests first; a stateless cursor, a stale or forged one refused
``prompts``           the active release's prompt assets served as MCP prompts
``list_changed``      list-changed notifications when a refresh changes the resource or prompt listing

The workflow, over the core:

``workflow_engine``   :class:`WorkflowEngineQueryModule`: the four workflow tools over one verified release
``workflow_selection`` the workflow a start names (id or alias; exact version or newest), and the catalogue that has it
``pinned_run``        a run picked up from its checkpoint: token verified, pinned workflow and state reloaded
``prepare_checks``    the deterministic checks of :meth:`prepare_step_validation`, every failure collected
``migration``         a run moved between two verified releases: the source departs, the target accepts or offers
``migration_offers``  the migration preview a tool result carries when a held target can take the run
``results``           the typed tool results the engine returns, serialised once by :meth:`to_json`

The releases a server holds:

``provider``          :class:`ReleaseProvider`: the verified releases a server holds, and refresh
``provider_start``    the releases a provider starts with: the one named, or each catalogue's newest that verifies
``provider_refresh``  what a refresh activates: per catalogue, the newest release in the directory that verifies
``loading``           what a server holds of one release, and the one way a release directory gets there
``release_scan``      a releases directory read: which ``<catalogue>-<version>`` directories it claims to hold
``floor``             the activation floor: the highest version ever activated, per catalogue and deployment
``deployment_state``  a deployment's activation floor in its state directory (also for ``rimthan-mcp check --release``)
``held_on_disk``      whether each release a server holds is still in its releases directory; the older
                      releases held for pinned runs
``trust_refresh``     the trust store read again on every refresh
``key_file_watch``    the checkpoint key file looked at on every refresh: a change is said, never reloaded
``file_looks``        how a file or a release directory looks by its stat alone: what a refresh compares
``follow``            following an OCI repository (``--releases-from``): the start, its first sync, nothing held refused
``follower``          the follower of one repository: new version tags pulled before each refresh, failures said once
``follow_memory``     the publishes a follower refused, by manifest digest: never pulled again under one trust store
``follow_disk``       a follower's releases directory: copies pulled, stale downloads, copies whose tag went
``recurring``         a failure that lasts many refreshes (a registry outage) logged once per kind
``last_sync``         the last good sync a follower made, kept in the state directory so a restart still says it
``logs``              structured JSON logs on stderr, one bounded line per record

The command line:

``cli``               ``rimthan-mcp``: the group and ``rimthan-mcp serve``
``cli_provider``      the releases ``rimthan-mcp serve`` holds: ``--release`` (and its target) or a directory
``cli_start_report``  what ``rimthan-mcp serve`` prints on stderr once its releases are loaded
``cli_serve_options`` the option combinations ``rimthan-mcp serve`` refuses as usage mistakes, before loading,
                      and ``--port`` and ``--host`` checked as they are read
``cli_check``         ``rimthan-mcp check``: a release verified exactly as ``rimthan-mcp serve`` loads it
``cli_keys``          ``rimthan-mcp audit`` and ``rimthan-mcp keys``: the commands over the checkpoint key file
``audit_log``         the run log ``rimthan-mcp audit`` reads: streamed line by line, each line bounded
``audit_releases``    the releases ``rimthan-mcp audit`` reads to tell how a run ended
``entry``             the console script: Ctrl-C and SIGTERM handled from its first instruction
"""
