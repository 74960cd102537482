"""rimthan-pack: validate, build, sign and verify catalogue releases.

The command line: ``cli`` (build, the warnings and key reading check and sign
share with it, and the entry point) over ``cli_options`` (the click group and
the options its commands share), with ``cli_check`` (check), ``cli_sign``
(sign), ``cli_author`` (keygen, init), ``cli_inspect`` (inspect, verify) and
``cli_oci`` (push, pull), which the group imports only when their commands are
run or listed; ``entry``
(the console script: Ctrl-C handled before the command line is imported).
The work: ``build`` (validate, sign, self-verify, atomic publish) with
``staging`` (the catalogue copied into the work directory, then flushed),
``layout`` (a source in ``catalogues/NAME/VERSION`` names that catalogue and
version; a workflow or adapter file it does not list, and a schema no workflow
references unless marked kept, are refused; ``unreferenced_schema``, what such a refusal names,
imported only when one is found), ``cosign`` (sign: a co-signature added to a release),
``kept_versions`` (a workflow changed since an older release in the releases
directory but still at its version there; ``kept_version``, the warning's
carrier, imported only when such a release is there), ``signing`` (the only
signing code in Rimthan), ``keygen`` (a new Ed25519 key pair, never over a
file nor where git tracks it), ``source`` (reading a
catalogue source) and ``scaffold`` (init), with ``fsutil`` (durable writes,
directories a build made), ``interrupt`` (a ``SIGTERM`` that unwinds a build),
``oci`` (push), and ``user_cache`` (metaschema checks already passed, kept in
the user's cache directory).
"""
