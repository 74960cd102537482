"""A catalogue schema refers only to itself: every ``$ref`` resolves inside its own document, nothing is fetched.

A release is signed so that what it checks is fixed. Python jsonschema's
default registry fetches any ``$ref`` it cannot resolve locally over the
network (``urlopen``, with a deprecation warning), at validation time: a
signed schema holding ``{"$ref": "https://example.com/x.json"}`` would have
the verifier fetch that document on a run's call and let its unsigned
content decide what passes. So:

- the catalogue rules refuse a schema with a ``$ref`` or ``$dynamicRef`` that
  does not resolve inside the schema itself (:func:`unresolved_reference`),
  at build and at load: a dangling local reference would otherwise fail a
  run's call instead of the build;
- every validator built from a catalogue schema is given
  :data:`NO_REMOTE_REFERENCES`, a registry that refuses to retrieve anything.

References are resolved the way jsonschema resolves them (the same
``referencing`` library, base URIs and embedded ``$id`` resources included),
walking only subschema positions, so a ``$ref`` key inside a ``const`` or an
``enum`` value is data, not a reference.
"""

from __future__ import annotations

from typing import Any

from referencing import Registry, Resource
from referencing.exceptions import NoSuchResource, Unresolvable
from referencing.jsonschema import DRAFT202012

__all__ = ["NO_REMOTE_REFERENCES", "unresolved_reference"]

_REFERENCE_KEYWORDS = ("$ref", "$dynamicRef")


def _refuse_retrieval(uri: str) -> Resource[Any]:
    raise NoSuchResource(uri)


NO_REMOTE_REFERENCES: Registry[Any] = Registry(retrieve=_refuse_retrieval)  # type: ignore[call-arg]
"""A registry that holds nothing and retrieves nothing: pass it as ``registry=`` to every catalogue validator."""


def unresolved_reference(schema: Any) -> str | None:
    """The first ``$ref``/``$dynamicRef`` in ``schema`` that does not resolve inside it, as a sentence; else ``None``.

    ``schema`` has passed the 2020-12 metaschema check. Each reference is
    looked up as jsonschema would look it up, with :data:`NO_REMOTE_REFERENCES`
    behind the document, so a reference to anything outside it (a URL, a
    file, another schema's ``$id``) fails here, as does a pointer to nothing.
    """
    root = DRAFT202012.create_resource(schema)
    registry = NO_REMOTE_REFERENCES.with_resource(root.id() or "", root)
    stack = [(root, registry.resolver(base_uri=root.id() or ""))]
    while stack:
        resource, resolver = stack.pop()
        contents = resource.contents
        if isinstance(contents, dict):
            for keyword in _REFERENCE_KEYWORDS:
                reference = contents.get(keyword)
                if isinstance(reference, str) and not _resolves(resolver, reference):
                    return (
                        f"its {keyword} {reference!r} does not resolve inside the schema; a catalogue schema may "
                        "refer only to itself (#/$defs/...): nothing outside the signed release is ever fetched"
                    )
        for child in resource.subresources():
            stack.append((child, resolver.in_subresource(child)))
    return None


def _resolves(resolver: Any, reference: str) -> bool:
    try:
        resolver.lookup(reference)
    except Unresolvable:
        return False
    return True
