"""Rimthan's domain core: plain Python, no MCP and no CLI imports.

Release side: ``release_format`` (layout, manifest records), ``trust`` (trust
store, key ids), ``verify`` (the one verification path), ``release``
(``VerifiedRelease``: digest-checked reads), ``catalogue`` / ``catalogue_rules``
/ ``loader`` (the catalogue model and the rules shared by build and load).

Run side: ``tokens`` / ``checkpoints`` (signed run state), ``confirmed_state``,
``host_compat``, ``repository_policy``, ``artifact_checks``, ``attestations``,
``validation_bundle``, ``step_payload``, ``workflow_engine`` (branches,
version order) and ``run_audit``; ``errors`` holds the one exception
hierarchy and the closed list of failure codes.
"""
