"""rimthan-pack: validate, build, sign and verify catalogue releases.

The command line: ``cli`` (keygen, build, sign, verify, init, and the entry
point) over ``cli_options`` (the click group and the options its commands
share), with ``cli_inspect`` (``inspect``) and ``cli_oci`` (``push``/``pull``).
The work: ``build`` (validate, sign, self-verify, atomic publish) with
``staging`` (the catalogue copied into the work directory, then flushed),
``cosign`` (``sign``: a co-signature added to a release), ``signing`` (the only
signing code in Rimthan), ``source`` (reading a catalogue source) and
``scaffold`` (``init``), with ``fsutil`` (durable writes, directories a build
made), ``interrupt`` (a ``SIGTERM`` that unwinds a build), ``oci`` (push), and
``user_cache`` (metaschema checks already passed, kept in the user's cache directory).
"""
