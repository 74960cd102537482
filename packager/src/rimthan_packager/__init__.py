"""rimthan-pack: validate, build, sign and verify catalogue releases.

``cli`` is the click front end over ``build`` (validate, copy, manifest,
sign, self-verify, atomic publish), ``signing`` (the only signing code in
Rimthan), ``source`` (reading a catalogue source) and ``scaffold`` (``init``), with
``fsutil`` (durable writes, directories a build made), ``interrupt`` (a
``SIGTERM`` that unwinds a build), ``oci`` and ``cli_oci`` (``push``/``pull``), and
``user_cache`` (metaschema checks already passed, kept in the user's cache directory).
"""
