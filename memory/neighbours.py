"""Which neighbour turns the prompt's block shows.

Retrieval credits a turn with the score of the turns around it (a turn
borrows from its neighbours, docs/RETRIEVAL.md §6) and returns one that
holds none of the message's words as ``Hit.neighbour``, context said next to
a match. Ranking needs that (LoCoMo's answers share no word with the
question). The prompt's few places do not: a line said next to a match that
shares nothing with the message ("My sister called about her exam results"
after "We bought tomato seedlings") tells the model nothing and takes a
place. In the block a neighbour earns its place only as the reply to a
matched question shown there: the turn just after it in the same
conversation ("what is your cat called?" / "Miso, she is three"). A
neighbour by definition holds no word of the query, so that is its one way
in. ``/memory`` and memory_search, which a person or the model asked,
still list every neighbour under its heading.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from .types import Hit

__all__ = ["earned"]


def _conversation(h: Hit) -> tuple[str, str, str] | None:
    """Channel, chat and session of a memory said in a conversation, as
    retrieval's neighbour key; None for a note or a fact of no chat."""
    p = h.provenance
    return (p.channel, p.chat_id, p.session) if h.kind == "memory" and (p.chat_id or p.session) else None


def _asks(text: str) -> bool:
    return "?" in text or "？" in text


def _answers(h: Hit, shown: Sequence[Hit]) -> bool:
    """``h`` is the turn just after a matched question among ``shown``."""
    here = _conversation(h)
    return here is not None and any(
        m.id == h.id - 1 and not m.neighbour and _conversation(m) == here and _asks(m.content) for m in shown
    )


def earned(hits: Sequence[Hit], fit: Callable[[list[Hit]], list[Hit]]) -> list[Hit]:
    """``hits`` (best first) fitted to the block by ``fit``, with the
    neighbours that are no reply to a matched question shown there left
    out, their places going to the next best."""
    pool = [h for h in hits if not h.neighbour or _answers(h, hits)]
    while True:
        kept = fit(pool)
        # Its question cut by the budget: context of nothing shown.
        orphans = {h.id for h in kept if h.neighbour and not _answers(h, kept)}
        if not orphans:
            return kept
        pool = [h for h in pool if h.id not in orphans]
