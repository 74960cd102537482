"""MCP prompts: the active release's ``prompt`` assets, as hosts offer them to users.

A catalogue's prompt assets are what a user types to begin a workflow (Claude
Code shows an MCP prompt as the slash command ``/mcp__<server>__<name>``).
The setup step also delivers them into the project; serving them as prompts
lets a user start before any file was delivered. Text comes only from the
verified release (``VerifiedRelease.read_file``); the Markdown front matter is
metadata (its ``description`` becomes the prompt's), and ``$ARGUMENTS`` is
replaced by the one optional argument, as Claude Code does for commands.

A prompt is used before setup-workspace has delivered anything, so it must not
depend on a delivered file: each host adapter the prompt's workflow pins is
attached to the prompt as an embedded resource (its verified text, at its
immutable release URI), so the model has the adapter at that point.
"""

from __future__ import annotations

from collections.abc import Mapping

import mcp_types as types
from mcp.shared.exceptions import MCPError
from mcp_types import INTERNAL_ERROR, INVALID_PARAMS
from rimthan_workflow_registry.errors import FailureCode, RegistryError
from rimthan_workflow_registry.release import AssetDefinition, HostAdapter, semver_key
from rimthan_workflow_registry.run import release_file_uri

from .provider import LoadedRelease, ReleaseProvider
from .rpc_errors import failure_error

PROMPT_KIND = "prompt"
ARGUMENT = "arguments"
PLACEHOLDER = "$ARGUMENTS"
FRONT_MATTER = "---"
ADAPTER_MIME = "text/markdown"
_ASK_A_LISTED_PROMPT = f"get a prompt by a name prompts/list gives, with at most the {ARGUMENT!r} argument"


def split_front_matter(text: str) -> tuple[dict[str, str], str]:
    """``key: value`` lines between leading ``---`` fences, and the body after them."""
    lines = text.splitlines(keepends=True)
    if not lines or lines[0].strip() != FRONT_MATTER:
        return {}, text
    for index, line in enumerate(lines[1:], start=1):
        if line.strip() == FRONT_MATTER:
            meta = {}
            for entry in lines[1:index]:
                key, sep, value = entry.partition(":")
                if sep and key.strip():
                    meta[key.strip()] = value.strip()
            return meta, "".join(lines[index + 1 :]).lstrip("\n")
    return {}, text


class PromptCatalogue:
    """Lists and renders the prompt assets of the releases active now (one per served catalogue)."""

    def __init__(self, provider: ReleaseProvider) -> None:
        self.provider = provider

    def _assets(self, loaded: LoadedRelease) -> dict[str, AssetDefinition]:
        """Prompt assets by id; for an id several workflow versions share, the newest version's file."""
        found: dict[str, AssetDefinition] = {}
        workflows = sorted(loaded.release.catalogue.workflows, key=lambda w: semver_key(w.version))
        for workflow in workflows:
            for asset in workflow.assets:
                if asset.kind == PROMPT_KIND:
                    found[asset.id] = asset
        return found

    @staticmethod
    def _adapters(loaded: LoadedRelease, name: str) -> list[HostAdapter]:
        """The host adapters pinned by the newest workflow that carries prompt ``name``."""
        catalogue = loaded.release.catalogue
        owners = [w for w in catalogue.workflows if any(a.kind == PROMPT_KIND and a.id == name for a in w.assets)]
        if not owners:
            return []
        newest = max(owners, key=lambda w: semver_key(w.version))
        found = (catalogue.adapter(key) for key in newest.host_adapters)
        return [adapter for adapter in found if adapter is not None]

    def _text(self, loaded: LoadedRelease, path: str, prompt: str) -> str:
        try:
            return loaded.release.read_file(path).decode("utf-8")
        except RegistryError as exc:  # changed on disk since it was verified: never serve it
            raise failure_error(INTERNAL_ERROR, exc, prompt=prompt) from None

    def _adapter_message(self, loaded: LoadedRelease, adapter: HostAdapter, prompt: str) -> types.PromptMessage:
        contents = types.TextResourceContents(
            uri=release_file_uri(loaded.digest, adapter.instruction),
            mime_type=ADAPTER_MIME,
            text=self._text(loaded, adapter.instruction, prompt),
        )
        return types.PromptMessage(role="user", content=types.EmbeddedResource(resource=contents))

    def _served(self) -> dict[str, tuple[LoadedRelease, AssetDefinition]]:
        """Prompt name -> (release, asset) over every served catalogue's active release.

        A prompt id one catalogue alone defines keeps its plain name; ids
        several catalogues share are named ``<catalogue>.<id>`` so none hides another.
        """
        by_id: dict[str, list[tuple[LoadedRelease, AssetDefinition]]] = {}
        for loaded in self.provider.actives.values():
            for asset_id, asset in self._assets(loaded).items():
                by_id.setdefault(asset_id, []).append((loaded, asset))
        served: dict[str, tuple[LoadedRelease, AssetDefinition]] = {}
        for asset_id, entries in by_id.items():
            for loaded, asset in entries:
                served[asset_id if len(entries) == 1 else f"{loaded.catalogue}.{asset_id}"] = (loaded, asset)
        return served

    def list_prompts(self) -> list[types.Prompt]:
        out = []
        for name, (loaded, asset) in sorted(self._served().items()):
            meta, _ = split_front_matter(self._text(loaded, asset.file, name))
            out.append(
                types.Prompt(
                    name=name,
                    title=f"{loaded.release.catalogue.title}: {name}",
                    description=meta.get("description") or f"Prompt {name} of {loaded.release.release_id}",
                    arguments=[
                        types.PromptArgument(
                            name=ARGUMENT, required=False, description=f"Text that replaces {PLACEHOLDER} in the prompt"
                        )
                    ],
                )
            )
        return out

    def get(self, name: str, arguments: Mapping[str, str] | None) -> types.GetPromptResult:
        found = self._served().get(name)
        if found is None:
            raise _refused(f"no prompt {name!r}; list prompts for the names", prompt=name)
        loaded, asset = found
        meta, body = split_front_matter(self._text(loaded, asset.file, name))
        extra = sorted(set(arguments or {}) - {ARGUMENT})
        if extra:
            raise _refused(f"prompt {name!r} takes only {ARGUMENT!r}", prompt=name, unexpected=extra)
        text = body.replace(PLACEHOLDER, (arguments or {}).get(ARGUMENT, ""))
        return types.GetPromptResult(
            description=meta.get("description"),
            messages=[
                types.PromptMessage(role="user", content=types.TextContent(text=text)),
                *(self._adapter_message(loaded, adapter, name) for adapter in self._adapters(loaded, asset.id)),
            ],
        )


def _refused(message: str, **asked: object) -> MCPError:
    """A prompts/get the catalogue cannot answer: ``invalid_arguments``, next: ask by a listed name."""
    failure = RegistryError(FailureCode.INVALID_ARGUMENTS, message, next_step=_ASK_A_LISTED_PROMPT)
    return failure_error(INVALID_PARAMS, failure, **asked)
