"""How interop/claude_run.py's model reads a tool result: from the bridge's words alone, as a model must.

:func:`read_result` turns the words Claude Code handed the model (the text content, or the structured content's
``text`` field on a 2026-07-28 connection) into :class:`Seen`, the move they ask for: the end, a validator's
verdict, a question's answer, files to write, ``step_done`` with the step named; a failed round's findings to act on
(:func:`repairs_asked`); the files the verifier refused, with the value a refusal says each wrong place must hold
(:func:`refusals_asked`), and :func:`repaired_json`, the file the model wrote with that value in place.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from rimthan_host.words import TEXT_FIELD

FAILED_ROUND = "A validator failed the step:"  # how the bridge's reply to a failed round lists its findings
FILES_REFUSED = "The verifier refused the files:"  # how the bridge's reply lists the verifier's refusals by file
SCHEMA_FAILED = "json_schema_failed"  # the refusal the model repairs: a value its JSON Schema does not allow


@dataclass(frozen=True)
class Refusal:
    """A refusal of a step's file, as the model acts on it: the file, the place in it (a JSON Pointer) and the
    value the refusal says was expected there."""

    path: str
    pointer: str
    expected: str


@dataclass(frozen=True)
class Seen:
    """What a bridge result asks of the model next."""

    complete: bool = False
    validators: tuple[str, ...] = ()
    question: str = ""  # the field of the question waiting for the user's answer
    files: tuple[str, ...] = ()
    step: str = ""
    failed: bool = False  # a validator failed the step: its findings say what to repair
    repairs: tuple[Repair, ...] = ()  # what a failed round's findings ask to change, before step_done again
    refused: bool = False  # the verifier refused the step's files: its refusals say what to fix
    refusals: tuple[Refusal, ...] = ()  # the refusals the model can act on, before step_done again


@dataclass(frozen=True)
class Repair:
    """A finding of a failed round, as the model acts on it: the file it names and the line it asks for."""

    path: str
    line: str


def read_result(result: str) -> Seen:
    """What a result as Claude Code passed it on asks for, from its words alone, as a model reads it."""
    return _read_text(words_of(result))


def words_of(result: str) -> str:
    """The bridge's words in a result: the structured content's text field where Claude Code handed the model the
    structured content as JSON (a 2026-07-28 connection), else the result as it is (the text content); a model
    handed structured content without words gets none."""
    data = json_object(result)
    if not data:
        return result
    words = data.get(TEXT_FIELD)
    return words if isinstance(words, str) else ""


def _read_text(text: str) -> Seen:
    asked = re.search(r"[Cc]all answer_question with (?:their answer and )?field (\S+?)[.;]", text)
    named = re.search(r"call step_done (?:with step|again; the run waits at step) (\S+?)\.", text)
    at = re.findall(r"^Run \S+ \([^)]*\): step (\S+) ", text, re.M)
    return Seen(
        complete=bool(re.search(r"^Run \S+ is complete\.", text, re.M)),
        validators=tuple(re.findall(r"^Validator (\S+) \(subagent ", text, re.M)),
        question=asked.group(1) if asked else "",
        files=tuple(files_to_write(text)),
        step=named.group(1) if named else (at[-1] if at else ""),
        failed=FAILED_ROUND in text,
        repairs=tuple(repairs_asked(text)),
        refused=FILES_REFUSED in text,
        refusals=tuple(refusals_asked(text)),
    )


def repairs_asked(text: str) -> list[Repair]:
    """The repairs a failed round's words ask for: each finding under "A validator failed the step:" that names
    one of the step's files (listed under "The step's files:") and a quoted line to add."""
    head, listed = text.find(FAILED_ROUND), text.find("The step's files:")
    if head < 0 or listed < 0:
        return []
    files = re.findall(r"^- (\S+)$", text[listed:], re.M)
    found = re.findall(r'^- [^:\s]+: (\S+) .*?add the line "([^"]+)"', text[head:listed], re.M)
    return [Repair(path, line) for path, line in found if path in files]


def refusals_asked(text: str) -> list[Refusal]:
    """The refusals under "The verifier refused the files:" the model can act on: under a file's line
    (``path (its JSON Schema: ...):``), a ``json_schema_failed`` at a place (``at /route``) saying which text was
    expected there. Any other refusal names nothing to put in place."""
    head = text.find(FILES_REFUSED)
    if head < 0:
        return []
    found, path = [], ""
    for line in text[head + len(FILES_REFUSED) :].splitlines():
        named = re.match(r"^(\S+)(?: \(.*\))?:$", line)
        wrong = re.match(rf"^  - {SCHEMA_FAILED} at (/\S*): .*?'([^']*)' was expected$", line)
        if named:
            path = named.group(1)
        elif wrong and path:
            found.append(Refusal(path, wrong.group(1), wrong.group(2)))
    return found


def repaired_json(text: str, refusals: list[Refusal]) -> str:
    """The JSON file as the model wrote it (``text``), each place a refusal names holding the value it expected
    ("" if the text is no JSON object or a place is not in it)."""
    document = json_object(text)
    for refusal in refusals:
        *parents, last = [p.replace("~1", "/").replace("~0", "~") for p in refusal.pointer.split("/")[1:]]
        node: Any = document
        for part in parents:
            node = node.get(part) if isinstance(node, dict) else None
        if not isinstance(node, dict) or last not in node:
            return ""
        node[last] = refusal.expected
    return json.dumps(document, indent=2) + "\n" if document else ""


def files_to_write(text: str) -> list[str]:
    """The paths under the bridge's "Write these files in the project directory ...:" list."""
    head = re.search(r"^Write these files in the project directory .*:$", text, re.M)
    if head is None:
        return []
    found = []
    for line in text[head.end() :].splitlines()[1:]:
        if line.startswith("- "):
            found.append(line[2:].split(" (")[0])
        elif not line.startswith("  "):
            break
    return found


def json_object(text: str) -> dict[str, Any]:
    """``text`` as a JSON object ({} if it is none)."""
    try:
        loaded = json.loads(text)
    except ValueError:
        return {}
    return loaded if isinstance(loaded, dict) else {}
