"""Shared cooldowns (``memory/failover.py``): which scope a failure cools,
and that callers given the same :class:`EndpointCooldowns` see each other's
outages. Pure state and a manual clock: no endpoint is called."""

from __future__ import annotations

from datetime import timedelta

from memory import ManualClock
from memory.failover import Cooldowns, EndpointCooldowns, endpoint_scopes

URL, OTHER = "http://10.0.0.1:8000/v1", "http://10.0.0.2:8000/v1"


def caller(board: EndpointCooldowns, clock: ManualClock, *endpoints: tuple[str, str, str]) -> Cooldowns:
    names = [f"c{i}" for i in range(len(endpoints))]
    return Cooldowns(names, [m for _, m, _ in endpoints], clock, shared=board,
                     scopes=[endpoint_scopes(u, m, k) for u, m, k in endpoints])


def test_the_same_endpoint_is_one_key_whoever_calls_it(clock: ManualClock) -> None:
    board = EndpointCooldowns()
    chat = caller(board, clock, (URL, "gpt", "key-a"), (OTHER, "backup", "key-b"))
    memory = caller(board, clock, (URL + "/", "gpt", "key-a"), (OTHER, "backup", "key-b"))
    assert memory.failed(0, "LLMUnavailable 503") == timedelta(seconds=30)
    assert chat.cooling(0) and chat.plan() == [1, 0]
    # A success either caller sees ends it for both; the doubling starts again.
    chat.succeeded(0)
    assert not memory.cooling(0) and memory.failures(0) == 0
    assert chat.failed(0, "again") == timedelta(seconds=30)


def test_a_failure_cools_the_scope_it_says_something_about(clock: ManualClock) -> None:
    board = EndpointCooldowns()
    chat = caller(board, clock, (URL, "gpt", "key-a"), (OTHER, "backup", "key-a"))
    small = caller(board, clock, (URL, "small", "key-a"), (OTHER, "backup", "key-a"))
    other_key = caller(board, clock, (URL, "gpt", "key-b"), (OTHER, "backup", "key-b"))
    # The model failing there (5xx) cools that model, whatever the key; not the host's other models.
    chat.failed(0, "LLMUnavailable 500", scope="model")
    assert other_key.cooling(0) and not small.cooling(0)
    chat.succeeded(0)
    # A key refused or rate limited: that key only.
    chat.failed(0, "LLMRateLimited 429", scope="key")
    assert chat.cooling(0) and not other_key.cooling(0) and not small.cooling(0)
    clock.advance(31)
    # No answer at all: every model on that host.
    other_key.failed(0, "LLMUnavailable", scope="host")
    assert chat.cooling(0) and small.cooling(0) and not chat.cooling(1)


def test_a_lone_caller_records_for_the_others_and_is_still_asked(clock: ManualClock) -> None:
    board = EndpointCooldowns()
    lone = caller(board, clock, (URL, "gpt", "k"))
    chat = caller(board, clock, (URL, "gpt", "k"), (OTHER, "backup", "k"))
    assert lone.failed(0, "LLMUnavailable 503") == timedelta(0)  # nothing to fail over to
    assert lone.plan() == [0] and chat.plan() == [1, 0]
    # Without a shared state a lone caller keeps none, as before.
    alone = Cooldowns(["c0"], ["gpt"], clock)
    alone.failed(0, "x")
    assert not alone.cooling(0)
