"""A catalogue schema refers only to itself, and no validator built from one fetches anything.

Python jsonschema fetches a ``$ref`` it cannot resolve locally with
``urlopen``. Before ``release.schema_refs``, a signed release whose schema
held a URL ``$ref`` built, verified and loaded, and the verifier fetched that
URL on a run's call: the unsigned document decided what passed. These tests
serve such a document from a real HTTP server on loopback and count requests.
"""

from __future__ import annotations

import http.server
import json
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from referencing.exceptions import Unresolvable
from rimthan_workflow_registry.release.catalogue_schema import CatalogueSchema
from rimthan_workflow_registry.release.schema_refs import unresolved_reference


class _Counting(http.server.BaseHTTPRequestHandler):
    requests: list[str] = []

    def do_GET(self) -> None:  # noqa: N802 (the stdlib's name)
        _Counting.requests.append(self.path)
        body = json.dumps({"type": "string", "maxLength": 3}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/schema+json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def remote_schema_url() -> Iterator[str]:
    """The URL of a schema served on loopback; the test fails if anything asked for it."""
    _Counting.requests = []
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Counting)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/short.schema.json"
    finally:
        server.shutdown()
        server.server_close()
    assert _Counting.requests == [], f"a schema reference was fetched: {_Counting.requests}"


def test_a_validator_built_from_a_catalogue_schema_fetches_nothing(remote_schema_url: str) -> None:
    """Were a schema with a URL ``$ref`` to reach a validator, checking a value is an error, not a fetch."""
    schema = CatalogueSchema({"type": "object", "properties": {"objective": {"$ref": remote_schema_url}}})
    with pytest.raises(Unresolvable):
        schema.is_valid({"objective": "a question far longer than three characters"})


def test_the_rules_refuse_a_url_reference_without_fetching_it(remote_schema_url: str) -> None:
    problem = unresolved_reference({"properties": {"objective": {"$ref": remote_schema_url}}})
    assert problem is not None and remote_schema_url in problem and "refer only to itself" in problem


REFUSED: dict[str, Any] = {
    "a relative file": {"properties": {"a": {"$ref": "other.schema.json"}}},
    "a pointer to nothing": {"properties": {"a": {"$ref": "#/$defs/missing"}}},
    "an anchor nobody declares": {"items": {"$ref": "#nowhere"}},
    "a relative file under an embedded $id": {
        "$defs": {"e": {"$id": "https://example.com/d/e", "items": {"$ref": "f"}}}
    },
    "a relative file under the root's $id": {"$id": "https://example.com/root", "items": {"$ref": "other"}},
    "a $dynamicRef to a URL": {"items": {"$dynamicRef": "https://example.com/meta#node"}},
    "the metaschema itself": {"$ref": "https://json-schema.org/draft/2020-12/schema"},
}

ACCEPTED: dict[str, Any] = {
    "a pointer into $defs": {"properties": {"a": {"$ref": "#/$defs/x"}}, "$defs": {"x": {"type": "string"}}},
    "an anchor it declares": {"$defs": {"x": {"$anchor": "word", "type": "string"}}, "items": {"$ref": "#word"}},
    "an embedded resource by its $id": {
        "$defs": {"e": {"$id": "https://example.com/e", "type": "string"}},
        "items": {"$ref": "https://example.com/e"},
    },
    "a pointer under the root's $id": {
        "$id": "https://example.com/root",
        "items": {"$ref": "#/$defs/x"},
        "$defs": {"x": {"type": "integer"}},
    },
    "a $ref key that is data, inside const": {"const": {"$ref": "https://example.com/x"}},
    "a $ref key that is data, inside enum": {"enum": [{"$ref": "other.json"}]},
}


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_a_reference_outside_the_schema_is_named(case: str) -> None:
    problem = unresolved_reference(REFUSED[case])
    assert problem is not None and "does not resolve inside the schema" in problem


@pytest.mark.parametrize("case", sorted(ACCEPTED))
def test_a_reference_inside_the_schema_passes(case: str) -> None:
    assert unresolved_reference(ACCEPTED[case]) is None
