"""The cache of issued tokens: exact-token hits only, bounded by total token length, LRU, safe across threads."""

from __future__ import annotations

import threading
from dataclasses import dataclass, replace

import pytest
from rimthan_workflow_registry.errors import FailureCode, TokenError
from rimthan_workflow_registry.run.checkpoints import (
    ISSUED,
    Checkpoint,
    HostBinding,
    issue_checkpoint,
    verify_checkpoint,
)
from rimthan_workflow_registry.run.issued_tokens import ISSUED_TOKEN_CHARS, IssuedTokens
from rimthan_workflow_registry.run.token_mac import AdmittedToken, AuthenticToken
from rimthan_workflow_registry.run.tokens import CheckpointKeyring


@dataclass(frozen=True)
class Item:
    token: str


KEY = b"k" * 32  # the key every item here is remembered as signed with


def token(n: int, size: int = 100) -> str:
    """A compact-form token of ``size`` characters whose final segment (the index) is unique to ``n``."""
    mac = f"mac{n:08d}"
    return "h." + "p" * (size - len(mac) - 3) + "." + mac


def test_only_the_exact_token_answers() -> None:
    cache: IssuedTokens[Item] = IssuedTokens(10_000)
    item = Item(token(1))
    cache.remember(item, KEY)
    assert cache.recall(item.token, KEY) is item
    assert cache.recall(item.token, b"j" * 32) is None  # the same characters under another key: no answer
    # the same final segment (what finds the entry) with any other character elsewhere is a miss
    other = "H" + item.token[1:]
    assert other.endswith(item.token.rsplit(".", 1)[1]) and cache.recall(other, KEY) is None
    assert cache.recall(item.token[:-1], KEY) is None
    assert cache.recall(item.token + "x", KEY) is None
    assert cache.recall("", KEY) is None and cache.recall("no-dots", KEY) is None


def test_the_total_token_length_stays_within_the_bound_least_recently_used_first_out() -> None:
    cache: IssuedTokens[Item] = IssuedTokens(1_000)
    items = [Item(token(n)) for n in range(30)]
    for at, item in enumerate(items):
        cache.remember(item, KEY)
        assert cache.chars <= 1_000
        if at >= 2:
            assert cache.recall(items[0].token, KEY) is items[0]  # kept in use, so never the one dropped
    assert cache.chars == 1_000 and len(cache) == 10
    assert cache.recall(items[0].token, KEY) is items[0]
    assert [cache.recall(i.token, KEY) is not None for i in items[-9:]] == [True] * 9
    assert all(cache.recall(i.token, KEY) is None for i in items[1:-9])


def test_remembering_a_token_again_replaces_its_entry_and_a_token_over_the_bound_is_not_kept() -> None:
    cache: IssuedTokens[Item] = IssuedTokens(1_000)
    first, again = Item(token(1)), Item(token(1))
    cache.remember(first, KEY)
    cache.remember(again, KEY)
    assert len(cache) == 1 and cache.chars == 100 and cache.recall(first.token, KEY) is again
    cache.remember(Item(token(2, size=1_001)), KEY)
    assert len(cache) == 1 and cache.chars == 100
    cache.clear()
    assert len(cache) == 0 and cache.chars == 0 and cache.recall(first.token, KEY) is None


def test_the_default_bound_holds_the_newest_checkpoint_of_many_long_runs() -> None:
    assert ISSUED_TOKEN_CHARS == 4 * 1024 * 1024
    assert IssuedTokens[Item]().max_chars == ISSUED_TOKEN_CHARS


def test_threads_remembering_and_recalling_at_once_keep_the_bound_and_the_answers() -> None:
    cache: IssuedTokens[Item] = IssuedTokens(5_000)
    wrong: list[tuple[str, Item]] = []
    over: list[int] = []

    def work(thread: int) -> None:
        for n in range(2_000):
            item = Item(token(thread * 10_000 + n % 120))
            cache.remember(item, KEY)
            found = cache.recall(item.token, KEY)
            if found is not None and found.token != item.token:
                wrong.append((item.token, found))
            if cache.chars > 5_000:
                over.append(cache.chars)

    threads = [threading.Thread(target=work, args=(t,)) for t in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not wrong and not over
    assert cache.chars <= 5_000 and len(cache) == cache.chars // 100


class _EqualToAnything(str):
    """A str subclass claiming equality with every string (its own characters are not a token)."""

    def __eq__(self, other: object) -> bool:
        return True

    def __ne__(self, other: object) -> bool:
        return False

    __hash__ = str.__hash__


def test_a_str_subclass_is_verified_by_its_own_characters_never_by_its_comparisons() -> None:
    keyring = CheckpointKeyring.generate()
    host = HostBinding.of("h", "1.0.0", ["c"], [])
    checkpoint = Checkpoint(1, "w", "1.0.0", "r@1", "sha256:" + "0" * 64, "s", "sha256:" + "1" * 64, None, host=host)
    issued = issue_checkpoint(keyring, checkpoint)
    assert verify_checkpoint(keyring, issued.token) is not None  # this thread now remembers that token
    with pytest.raises(TokenError) as refused:
        verify_checkpoint(keyring, _EqualToAnything("not.a.token"))
    assert refused.value.code is FailureCode.CHECKPOINT_INVALID
    # a subclass holding the very characters issued verifies as those characters: a plain str, as issued
    again = verify_checkpoint(keyring, _EqualToAnything(issued.token))
    assert type(again.token) is str and again.checkpoint == issued.checkpoint


def test_an_issued_token_answers_without_a_second_mac_only_under_the_key_that_signed_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The MAC is computed again for any token that is not exactly one issued here with the key its id names."""
    macs: list[str] = []
    authentic = AdmittedToken.authentic

    def counted(self: AdmittedToken) -> AuthenticToken:
        macs.append(self.segments.token)
        return authentic(self)

    monkeypatch.setattr(AdmittedToken, "authentic", counted)
    keyring = CheckpointKeyring.generate()
    host = HostBinding.of("h", "1.0.0", ["c"], [])
    checkpoint = Checkpoint(1, "w", "1.0.0", "r@1", "sha256:" + "0" * 64, "s", "sha256:" + "1" * 64, None, host=host)
    issued = issue_checkpoint(keyring, checkpoint)
    assert verify_checkpoint(replace(keyring), issued.token) is issued and macs == []
    impostor = CheckpointKeyring(signing_key_id=keyring.signing_key_id, keys={keyring.signing_key_id: b"x" * 32})
    with pytest.raises(TokenError) as refused:
        verify_checkpoint(impostor, issued.token)
    assert "InvalidSignatureError" in refused.value.message and macs == [issued.token]
    ISSUED.clear()
    again = verify_checkpoint(replace(keyring), issued.token)
    assert again.checkpoint == issued.checkpoint and macs == [issued.token, issued.token]


def test_a_token_with_a_character_outside_ascii_is_malformed() -> None:
    keyring = CheckpointKeyring.generate()
    host = HostBinding.of("h", "1.0.0", ["c"], [])
    checkpoint = Checkpoint(1, "w", "1.0.0", "r@1", "sha256:" + "0" * 64, "s", "sha256:" + "1" * 64, None, host=host)
    token = issue_checkpoint(keyring, checkpoint).token
    at = token.index(".") + 3
    with pytest.raises(TokenError) as refused:
        verify_checkpoint(keyring, token[:at] + "\u00e9" + token[at + 1 :])
    assert refused.value.code is FailureCode.CHECKPOINT_INVALID and "malformed" in refused.value.message


class _Watched(IssuedTokens[Item]):
    """Every value the total takes, as it is written (what a reader on another thread could see)."""

    def __setattr__(self, name: str, value: object) -> None:
        if name == "_chars":
            self.__dict__.setdefault("written", []).append(value)
        super().__setattr__(name, value)


def test_the_total_never_passes_the_bound_even_between_two_lines() -> None:
    """``chars`` is read without the lock: no write may take it past ``max_chars``, even for a moment."""
    cache = _Watched(250)
    for n in range(10):
        cache.remember(Item(token(n)), KEY)
    assert len(cache) == 2 and max(cache.__dict__["written"]) <= 250
