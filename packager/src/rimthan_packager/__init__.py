"""rimthan-pack: validate, build, sign and verify catalogue releases.

``cli`` is the click front end over ``build`` (validate, copy, manifest,
sign, self-verify, atomic publish), ``signing`` (the only signing code in
Rimthan), ``source`` (reading a catalogue source) and ``scaffold`` (``init``).
"""
