"""gateway/privatechat.py: what the gateway knows of its chats' kinds."""

from __future__ import annotations

from pathlib import Path

from gateway.privatechat import label_private_chats
from gateway.sessions import SessionStore
from memory import ManualClock, MemoryEngine
from memory.types import NewMemory, Provenance


async def test_old_feishu_facts_of_chats_known_private_are_labelled_so_at_start(
    tmp_path: Path, clock: ManualClock, engine: MemoryEngine
) -> None:
    """Facts from before the chat kind was kept are taken for a group's;
    Tier 0 knows which Feishu chats were private (each message's context
    says whether it came in a group): those are labelled private, and no
    other chat."""
    def old(chat_id: str) -> Provenance:
        return Provenance.from_json(f'{{"channel":"feishu","chat_id":"{chat_id}"}}')

    ids = {c: (await engine.add(NewMemory(owner="alice", content=f"fact of {c}", provenance=old(c)))).id
           for c in ("oc_dm", "oc_team", "oc_unknown", "oc_dm_old")}
    async with await SessionStore.open(tmp_path / "g.db", clock) as store:
        for chat, ctx in (("oc_dm", '{"g": false}'), ("oc_team", '{"g": false}'), ("oc_team", '{"g": true}'),
                          ("oc_dm_old", "")):  # a row from before contexts were kept tells nothing
            await store.append(f"feishu:{chat}", channel="feishu", chat_id=chat, role="user", content="hi",
                               owner="alice", context=ctx)
        assert await label_private_chats(engine, store) == 1
    got = await engine.get_many(list(ids.values()))
    assert [c for c, i in ids.items() if got[i].provenance.group is False] == ["oc_dm"]
    assert all(got[i].provenance.group is None for c, i in ids.items() if c != "oc_dm")
