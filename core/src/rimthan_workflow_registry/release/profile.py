"""The scope profile a release must declare unless the caller says otherwise.

In a module of its own (no imports) so a CLI can show it as an option default
without importing the verifier and jsonschema.
"""

DEFAULT_PROFILE = "workflow-engine"
