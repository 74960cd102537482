"""Rimthan's domain core: plain Python, no MCP and no CLI imports.

Two sub-packages show the two sides of the product:

``rimthan_workflow_registry.release``
    What a signed release is and the one path that verifies it (format, trust,
    verify, verified reads, catalogue model and rules, loader).
``rimthan_workflow_registry.run``
    Signed run state and the deterministic checks of one step (tokens,
    checkpoints, confirmed state, host binding, repository policy, artifact
    checks, attestations, validation bundle, step payload, audit).

At the top, shared by both:

``errors``             the one exception hierarchy and the closed list of failure codes
``failures``           collected failure records
``remediation``        what to do about each failure code (the ``next:`` line), and the exit statuses
``canonical``          RFC 8785 canonical JSON and SHA-256 digests, from cryptography
``strict_json``        JSON read strictly: no repeated key, NaN, overflowing number or nesting past a bound
``json_encoders``      the stdlib's compact JSON encoders, each built once
``limits``             one copy of each bound on untrusted input (nesting, the sizes one tool call carries)
``not_utf8``           where a text file's first byte that is not UTF-8 stands (imported only for such a file)
``jsonschema_formats`` the one import of Python jsonschema, each format library loaded on its first check
``pem_keys``           PEM keys read and written with cryptography's own functions, without its OpenSSH key code:
                       the trust store's public keys, the packager's signing keys
``key_file_modes``     who besides its owner may read or write a signing or checkpoint key file, in one warning
``key_file_warning``   that warning's wording and types, imported only when a key file is open to others
``secret_paths``       never write a secret where git tracks it
``small_files``        a key or trust file read bounded, and only if it is a regular file: a FIFO never blocks
``whole_writes``       every byte written, a short write going on
``installed_version``  an installed distribution's version, from its metadata: both servers' ``serverInfo``
``state_dir``          the verifier's default state directory, which the host kit's audit command names too
``state_formats``      a state file a newer version wrote (a rollback): told apart, never read or rewritten
``below_floor``        the record a verifier refused below its activation floor logs, as the bridge reads it
``protocol_names``     the names the four-tool workflow protocol fixes, defined once
``workflow_engine``    the protocol's :func:`resolve_branches` and version order
``lazy_exports``       ``release``'s and ``run``'s public names imported from their modules on first use
``entry``              the console scripts' first instructions: Ctrl-C and SIGTERM handled before their
                       imports; stdlib only
"""
