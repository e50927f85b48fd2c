from __future__ import annotations

import os
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import pytest

from memory import GLOBAL_OWNER, Category, ManualClock, MemoryEngine, NewMemory, Provenance, Source, retrieval, tokenize
from memory.clock import format_ts
from memory.retrieval import MIN_RELEVANCE, NEIGHBOUR_WEIGHT, Retriever
from memory.engine import INDEX_VERSION
from memory.mood import LEXICON, MOOD_TERMS, is_mood_term, mood_class, mood_term


async def add(engine: MemoryEngine, owner: str, content: str, *, at: str | None = None, **kw: object) -> int:
    return (await engine.add(NewMemory(owner=owner, content=content, **kw), at=at)).id  # type: ignore[arg-type]


async def ids(r: Retriever, user: str, query: str, **kw: object) -> list[int]:
    return [h.id for h in await r.retrieve(user, query, **kw)]  # type: ignore[arg-type]


# -- relevance --------------------------------------------------------------


async def test_english_stemmed_match_ranks_first(engine: MemoryEngine) -> None:
    target = await add(engine, "alice", "Alice prefers pnpm as her package manager")
    for text in [
        "Alice deployed the web app on Friday",
        "Alice's manager is called Bob",
        "The team uses npm in CI",
        "Alice drinks coffee every morning",
    ]:
        await add(engine, "alice", text)
    r = Retriever(engine)
    assert (await ids(r, "alice", "what package manager do I prefer?"))[0] == target
    assert (await ids(r, "alice", "which packages did I say I preferred"))[0] == target


async def test_chinese_two_character_word_inside_sentence_ranks_first(engine: MemoryEngine) -> None:
    target = await add(engine, "u", "我的服务器部署密码是 hunter2，存在 vault 里", category=Category.CREDENTIAL)
    for text in ["部署脚本放在 ops 仓库", "每天早上喝一杯咖啡", "数据库用的是 PostgreSQL 15", "周五下午部署到生产环境"]:
        await add(engine, "u", text)
    r = Retriever(engine)
    assert (await ids(r, "u", "我之前说的密码是什么？"))[0] == target
    assert (await ids(r, "u", "部署密码"))[0] == target


async def test_chinese_longer_phrase_and_single_character(engine: MemoryEngine) -> None:
    cat = await add(engine, "u", "家里的猫叫咪咪，三岁了")
    ml = await add(engine, "u", "机器学习课程下周一开始")
    await add(engine, "u", "学习英语每天半小时")
    await add(engine, "u", "机器人比赛得了二等奖")
    await add(engine, "u", "狗叫旺财")
    r = Retriever(engine)
    assert (await ids(r, "u", "猫"))[0] == cat
    assert (await ids(r, "u", "机器学习什么时候开始"))[0] == ml


async def test_a_content_word_with_a_grammar_character_outweighs_glue(engine: MemoryEngine) -> None:
    # 上 is a grammar character (上面, 桌子上), so 上海 weighed as glue, as
    # much as 那边: the memory that says 那边 … 上面 tied the one about
    # 上海 and came first. Known content words (上海, 会议, 地铁, 难过) weigh
    # as words (docs/RETRIEVAL.md §3).
    shanghai = await add(engine, "u", "小李去年搬到上海工作了")
    await add(engine, "u", "钥匙放在那边的桌子上面")
    for text in ["每天早上喝一杯咖啡", "周五下午开会", "数据库用的是 PostgreSQL 15"]:
        await add(engine, "u", text)
    r = Retriever(engine)
    assert (await ids(r, "u", "上海那边怎么样？"))[0] == shanghai


async def test_mixed_chinese_english_query(engine: MemoryEngine) -> None:
    target = await add(engine, "u", "myclaw 部署在阿里云杭州节点")
    await add(engine, "u", "myclaw 用 Python 写的")
    await add(engine, "u", "博客部署在 Vercel")
    r = Retriever(engine)
    assert (await ids(r, "u", "myclaw部署在哪里"))[0] == target


async def test_tiny_collection_gets_a_real_score(engine: MemoryEngine) -> None:
    # FTS5's bm25() gives ~1e-6 here (IDF clamped when a term is in every row).
    mid = await add(engine, "solo", "Solo keeps the wifi password on the fridge")
    hits = await Retriever(engine).retrieve("solo", "wifi password")
    assert [h.id for h in hits] == [mid]
    assert hits[0].score > 0.7


async def test_score_is_per_hit_not_relative_to_the_result_set(engine: MemoryEngine) -> None:
    weak = await add(engine, "u", "the garden hose is green")
    r = Retriever(engine)
    alone = await r.retrieve("u", "garden hose repair kit")
    await add(engine, "u", "the garden hose repair kit is in the garage")
    together = await r.retrieve("u", "garden hose repair kit")
    # Min-max scaling would make the only hit score 1.0 and then drop it to 0.
    assert alone[0].id == weak and alone[0].score < 0.8
    assert together[0].id != weak and together[0].score > alone[0].score
    assert [h.score for h in together if h.id == weak][0] > MIN_RELEVANCE


@pytest.mark.parametrize(
    ("old", "new", "context", "query"),
    [
        (
            "the redis cache listens on port 6380",
            "postgres listens on port 5433",
            ["the redis cache was slow", "redis again", "restarted redis", "redis is fine now"],
            "which port does postgres use?",
        ),
        ("redis 缓存的端口是 6380", "postgres 的端口是 5433", ["我们昨天调了 redis 缓存", "缓存命中率还可以"], "postgres 用的哪个端口？"),
    ],
)
async def test_a_topic_of_the_recent_turns_still_loses_to_the_message(
    engine: MemoryEngine, old: str, new: str, context: list[str], query: str
) -> None:
    # The user talked about the redis cache, then asks about postgres: the
    # old topic's memory holds more of the query's terms (port, redis,
    # cache; in Chinese each character too), the new one the message's own
    # word. Coordination counting context terms like message terms failed
    # the Chinese case (docs/RETRIEVAL.md §9).
    await add(engine, "u", old)
    pg = await add(engine, "u", new)
    assert (await ids(Retriever(engine), "u", query, context=context))[0] == pg


async def test_stop_words_alone_retrieve_nothing(engine: MemoryEngine) -> None:
    await add(engine, "u", "what do you remember about me")
    assert await Retriever(engine).retrieve("u", "what do you remember?") == []
    assert await Retriever(engine).retrieve("u", "你还记得什么吗") == []


async def test_context_helps_but_counts_less_than_the_message(engine: MemoryEngine) -> None:
    redis = await add(engine, "u", "the redis cache listens on port 6380")
    pg = await add(engine, "u", "postgres listens on port 5433")
    r = Retriever(engine)
    vague = await ids(r, "u", "which port was it?", context=["we set up the redis cache yesterday"])
    assert vague[0] == redis
    # The message names postgres; redis only in context must not win.
    direct = await ids(r, "u", "which port does postgres use?", context=["the redis cache was slow"])
    assert direct[0] == pg


def test_a_recent_turn_is_tokenized_once_while_it_stays_in_context() -> None:
    # A turn is context for the next few messages of its chat: its terms
    # are kept, and the query built from them is the same every time.
    turns = ["我们昨天调了 redis 缓存，端口改成了 6380", "which port did we pick for the redis cache?"]
    first = retrieval.build_query("是哪个端口来着", turns)
    before = retrieval._turn_terms.cache_info()
    again = retrieval.build_query("还记得吗", turns[1:])
    assert retrieval._turn_terms.cache_info().hits == before.hits + 1
    assert retrieval.build_query("是哪个端口来着", turns) == first
    own = {x.term for x in again if x.from_query}
    assert {x.term for x in again if not x.from_query} == {t for t, _ in tokenize.query_terms(turns[1])} - own


# -- mood-congruent recall (memory.mood) -------------------------------------


@pytest.mark.parametrize(
    ("target", "others", "query"),
    [
        (  # no word in common; the exam memory shares a word but not the feeling
            "Tom was anxious before the piano recital",
            ["Tom passed the maths exam and was happy", "Tom baked cookies with grandma"],
            "I'm really nervous about tomorrow's exam.",
        ),
        (
            "Tom missed the bus to the museum and felt worried all morning",
            ["Tom went to the beach with his family, feeling happy", "Tom baked cookies with grandma"],
            "I'm really nervous about tomorrow's exam.",
        ),
        ("小明数学考试考砸了，很难过", ["小明在公园放风筝，非常开心", "小明和奶奶一起包饺子"], "我的画没有入选比赛，好伤心"),
        ("小明数学考试前很焦虑", ["小明在公园放风筝，非常开心", "小明和奶奶一起包饺子"], "明天要上台演讲，我好紧张"),
    ],
)
async def test_a_feeling_recalls_a_memory_of_the_same_feeling(
    engine: MemoryEngine, target: str, others: list[str], query: str
) -> None:
    # Without the mood term the target shares no word with the message: the
    # first two and the Chinese ones found nothing or the happy memory first.
    mid = await add(engine, "u", target)  # first: a tie goes to the newest
    for text in others:
        await add(engine, "u", text)
    assert (await ids(Retriever(engine), "u", query))[0] == mid


@pytest.mark.parametrize(
    ("old", "new", "query", "context"),
    [
        ("the redis cache listens on port 6380, I was worried it would fail", "postgres listens on port 5433",
         "I'm worried: which port does postgres use?", []),
        ("the redis cache listens on port 6380, I was worried it would fail", "postgres listens on port 5433",
         "I'm so nervous: which port does postgres use?", []),
        ("redis 缓存的端口是 6380，当时很担心", "postgres 的端口是 5433", "好担心，postgres 用的哪个端口？", []),
        ("redis 缓存的端口是 6380，当时很担心", "postgres 的端口是 5433", "好紧张，postgres 用的哪个端口？", []),
        ("the redis cache listens on port 6380, I was worried it would fail", "postgres listens on port 5433",
         "which port does postgres use?", ["I was so worried about the redis cache", "redis again"]),
        ("redis 缓存的端口是 6380，当时很担心", "postgres 的端口是 5433", "postgres 用的哪个端口？",
         ["我们昨天调了 redis 缓存，我很担心", "缓存命中率还可以"]),
    ],
)  # fmt: skip
async def test_a_feeling_does_not_pull_a_memory_of_another_topic(
    engine: MemoryEngine, old: str, new: str, query: str, context: list[str]
) -> None:
    # The feeling counts like one word, not on top of the same word in the
    # memory (worried / 担心), and only the message's: a mood in the recent
    # turns belongs to their topic.
    await add(engine, "u", old)
    pg = await add(engine, "u", new)
    assert (await ids(Retriever(engine), "u", query, context=context))[0] == pg


def test_mood_terms_are_not_counted_in_a_memory_length() -> None:
    q = retrieval.build_query("garden hose")
    rel = retrieval._Relevance(q, {x.term: 2.0 for x in q}, avg_len=6.0)
    assert rel("the garden hose is green \ue000sad") == rel("the garden hose is green")


def _bm25_by_hand(q: list[retrieval.QueryTerm], idf: dict[str, float], avg_len: float, doc: str, dated: bool) -> float:
    """_Relevance written out term by term, as docs/RETRIEVAL.md §3 says it."""
    k1, b = retrieval._K1, retrieval._B
    text, _, cues = doc.partition(retrieval.CUE_MARK)
    words = text.rstrip(" ").split(" ")
    n = max(1, sum(1 for x in words if x not in MOOD_TERMS))
    norm = k1 * (1 - b + b * n / avg_len)
    got = 0.0
    for x in q:
        if x.term == retrieval.WHEN_TERM:
            got += x.weight * idf[x.term] * (k1 + 1) / (1 + norm) if dated else 0.0
            continue
        f = words.count(x.term)
        if f and is_mood_term(x.term) and any(
            y.from_query and y.term in words and LEXICON.get(y.term) == mood_class(x.term) for y in q
        ):
            continue  # the message's own word of that feeling already counted
        if f:
            got += x.weight * idf[x.term] * f * (k1 + 1) / (f + norm)
        elif (c := cues.split().count(x.term)):
            got += retrieval.CUE_WEIGHT * x.weight * idf[x.term] * c * (k1 + 1) / (c + norm)
    mass = sum(x.weight * idf[x.term] for x in q if x.from_query)
    return got / mass


@pytest.mark.parametrize(
    "doc,dated",
    [
        ("garden hose garden green hose garden", False),
        ("the garden hose is green \ue000sad \ue000sad", True),
        ("garden  hose", False),  # an empty term counts in the length, as FTS5 row text can hold one
        ("hose is green \ue001 garden garden shed", False),  # a cue word counts where the text lacks it
        ("garden hose \ue001 garden hose", True),  # ... and not where the text says it
        ("i was scared of the garden hose \ue000fear", False),  # the feeling once, through the word
        ("the shed was dark \ue000fear \ue001 garden", True),
        ("", False),
    ],
)
def test_relevance_is_bm25_of_the_query_terms_a_memory_holds(doc: str, dated: bool) -> None:
    # Pins the fast path (only the query's terms are counted) to the sum
    # written out term by term, moods, cues and a time reference included.
    q = [*retrieval.build_query("garden hose, I'm scared", ["the shed"]),
         retrieval.QueryTerm(mood_term("fear"), 1.0, False), retrieval.QueryTerm(retrieval.WHEN_TERM, 1.0, True)]
    idf = {x.term: 1.0 + i / 7 for i, x in enumerate(q)}
    got = retrieval._Relevance(q, idf, avg_len=5.0)(doc, dated)
    assert got == pytest.approx(_bm25_by_hand(q, idf, 5.0, doc, dated), rel=1e-12)
    if "garden" in doc.split(" ") or dated:
        assert got > 0.0


_LONG_CONVERSATIONS = {
    "zh": (
        "和家人一起装饰圣诞树，挂了彩灯，很开心",
        "晚上在山顶看星星，特别美",
        [
            "我最喜欢装饰圣诞树了，去年和家人一起装饰的",
            "今年我们班也要布置教室，老师说每个同学都可以带一样自己做的东西",
            "我们班准备用手工小挂件和彩色的纸链，我想带点特别的",
            "我做手工一向很认真，上次做的纸灯笼大家都说漂亮，这次也想做得好看一点",
        ],
        "嗯，我想做一些星星和雪花形状的",
    ),
    "en": (
        "decorated the christmas tree with the family, lights and all",
        "watched the stars from the hill at night",
        [
            "I love decorating the christmas tree, last year we did it with the whole family",
            "This year our class is decorating the classroom and everyone brings something",
            "We are making paper chains and little ornaments, everything handmade",
            "I always take crafts seriously, people liked my paper lanterns last time",
        ],
        "I want to make some stars and snowflake shapes",
    ),
}


@pytest.mark.parametrize("lang", sorted(_LONG_CONVERSATIONS))
async def test_every_turn_of_a_long_conversation_counts(engine: MemoryEngine, lang: str) -> None:
    # Chinese turns make many terms (characters and bigrams); the topic was
    # set four turns ago and the message only adds a detail.
    topic, detail, context, message = _LONG_CONVERSATIONS[lang]
    target = await add(engine, "u", topic)
    await add(engine, "u", detail)
    assert (await ids(Retriever(engine), "u", message, context=context))[0] == target


async def test_named_project_partition_is_favoured(engine: MemoryEngine) -> None:
    infra = await add(engine, "u", "deploys happen with ansible", project="infra")
    shop = await add(engine, "u", "deploys happen with ansible too", project="webshop")
    r = Retriever(engine)
    assert (await ids(r, "u", "how do webshop deploys happen"))[0] == shop
    assert (await ids(r, "u", "how do infra deploys happen"))[0] == infra


# -- scoping ----------------------------------------------------------------


async def test_user_never_sees_another_users_rows_but_both_see_global(engine: MemoryEngine) -> None:
    a = await add(engine, "telegram:1", "my bank pin is 4321")
    g = await add(engine, "_global", "the bank holiday is on monday")
    r = Retriever(engine)
    assert set(await ids(r, "telegram:1", "bank pin")) == {a, g}
    assert await ids(r, "feishu:ou_2", "bank pin") == [g]
    assert a not in [h.id for h in await r.search_events("feishu:ou_2", "bank pin")]


async def test_group_chat_excludes_credentials(engine: MemoryEngine) -> None:
    here = Provenance(channel="telegram", chat_id="-5")
    cred = await add(engine, "u", "the router password is swordfish", category=Category.CREDENTIAL, provenance=here)
    other = await add(engine, "u", "the router is in the hallway", category=Category.CONFIG, provenance=here)
    r = Retriever(engine)
    assert cred in await ids(r, "u", "router password")
    assert await ids(r, "u", "router password", private=False, chat=("telegram", "-5")) == [other]


async def test_a_group_reads_only_what_the_user_said_in_it(engine: MemoryEngine) -> None:
    """A private chat's fact (health), another group's, and one of no chat
    (a summary, a note from the memory page) stay out; the shared row comes."""
    private = await add(engine, "u", "my insomnia medication is zolpidem",
                        provenance=Provenance(channel="telegram", chat_id="100"))
    here = await add(engine, "u", "the team medication tracker ships Friday",
                     provenance=Provenance(channel="telegram", chat_id="-5"))
    there = await add(engine, "u", "I told the climbing club about my medication",
                      provenance=Provenance(channel="telegram", chat_id="-6"))
    other_channel = await add(engine, "u", "medication reminders on Feishu",
                              provenance=Provenance(channel="feishu", chat_id="-5"))
    summary = await add(engine, "u", "weekly: medication and sleep", source=Source.COMPRESSION)
    shared = await add(engine, GLOBAL_OWNER, "the office medication cabinet is in room 3")
    r = Retriever(engine)
    assert set(await ids(r, "u", "medication", limit=10)) == {private, here, there, other_channel, summary, shared}
    assert set(await ids(r, "u", "medication", private=False, chat=("telegram", "-5"))) == {here, shared}
    assert set(await ids(r, "u", "medication", private=False, chat=("telegram", "-6"))) == {there, shared}
    # No group named: the shared rows only; a quote in an id is an id, not SQL.
    assert await ids(r, "u", "medication", private=False) == [shared]
    assert await ids(r, "u", "medication", private=False, chat=("telegram", "-5' OR 1=1 --")) == [shared]


async def test_inactive_rows_are_not_retrieved(engine: MemoryEngine) -> None:
    old = await add(engine, "u", "I use npm for the frontend")
    new = await add(engine, "u", "I use pnpm for the frontend now")
    await engine.set_status(old, "superseded", superseded_by=new)
    assert await ids(Retriever(engine), "u", "frontend package tool npm pnpm") == [new]


# -- decay and importance -----------------------------------------------------


async def test_old_temp_fact_loses_to_fresh_one_of_equal_relevance(engine: MemoryEngine, clock: ManualClock) -> None:
    old_at = format_ts(clock.now() - timedelta(days=60))
    old = await add(engine, "u", "build cache lives in /tmp/cache-a", category=Category.TEMP, at=old_at)
    fresh = await add(engine, "u", "build cache lives in /tmp/cache-b", category=Category.TEMP)
    assert await ids(Retriever(engine), "u", "where does the build cache live") == [fresh, old]


async def test_identity_never_decays(engine: MemoryEngine, clock: ManualClock) -> None:
    old_at = format_ts(clock.now() - timedelta(days=900))
    await add(engine, "u", "my name is Li Lei", category=Category.IDENTITY, importance=0.9, at=old_at)
    await add(engine, "u", "my name is Han Meimei", category=Category.IDENTITY, importance=0.9)
    hits = await Retriever(engine).retrieve("u", "name")
    assert len(hits) == 2 and abs(hits[0].score - hits[1].score) < 1e-9


async def test_importance_never_lifts_an_unrelated_memory_above_the_answer(
    engine: MemoryEngine, clock: ManualClock
) -> None:
    old_at = format_ts(clock.now() - timedelta(days=45))
    answer = await add(engine, "u", "the staging database password rotates monthly", category=Category.TEMP,
                       importance=0.1, at=old_at)
    await add(engine, "u", "my staging server is in Frankfurt", category=Category.IDENTITY, importance=1.0)
    assert (await ids(Retriever(engine), "u", "staging database password"))[0] == answer


async def test_now_defaults_to_the_engine_clock(engine: MemoryEngine, clock: ManualClock) -> None:
    a = await add(engine, "u", "parking spot is B12", category=Category.TEMP)
    clock.advance(timedelta(days=30))
    b = await add(engine, "u", "parking spot is C7", category=Category.TEMP)
    r = Retriever(engine)
    assert await ids(r, "u", "parking spot") == [b, a]
    # Seen from the day a was written, b does not exist yet in its decay terms.
    back = await r.retrieve("u", "parking spot", now=clock.now() - timedelta(days=30))
    assert {h.id for h in back} == {a, b}


# -- events and budget --------------------------------------------------------


async def test_event_hits_carry_provenance_for_citation(engine: MemoryEngine) -> None:
    ev = await engine.add_event(
        "u", "2026-02-20", "Discussed moving the blog to Hugo", channel="telegram", chat_id="42",
        provenance=Provenance(message_ids=("m1", "m2")),
    )
    await engine.add_event("u", "2026-02-21", "Talked about dinner plans")
    hits = await Retriever(engine).search_events("u", "blog hugo")
    assert [h.id for h in hits] == [ev.id]
    h = hits[0]
    assert h.provenance.channel == "telegram" and h.provenance.message_ids == ("m1", "m2")
    assert h.citation() == f"[e{ev.id} · 2026-02-20 · summary of a chat on Telegram]"
    assert h.citation(zh=True) == f"[e{ev.id} · 2026-02-20 · Telegram 上的对话摘要]"


async def test_a_time_reference_finds_that_periods_events_first(engine: MemoryEngine) -> None:
    """"What did we talk about last week?" shares no word with last week's
    summaries: the period finds them, above an event of another week that
    matches a word; another user's event of that week never comes."""
    last = await engine.add_event("u", "2026-02-20", "Planned the hiking trip to the Alps")
    other = await engine.add_event("u", "2026-02-10", "We talk about talking: a talk on public speaking")
    await engine.add_event("u", "2026-02-26", "Fixed the kitchen sink")  # this week (Sunday 2026-03-01 now)
    await engine.add_event("v", "2026-02-19", "Someone else's week")
    r = Retriever(engine)
    hits = await r.search_events("u", "what did we talk about last week?")
    assert [h.id for h in hits][:2] == [last.id, other.id]
    assert [h.id for h in await r.search_events("u", "what did we talk about last week?", period_only=True)] == [
        last.id
    ]
    assert await r.search_events("u", "what did we talk about?", period_only=True) == []


async def test_an_events_period_is_on_the_users_calendar(engine: MemoryEngine, clock: ManualClock) -> None:
    """At 01:00 Monday in Shanghai (Sunday 17:00 UTC), 上周 there is the week
    that ended a hour ago, Sunday's chat included; UTC's is the one before."""
    from zoneinfo import ZoneInfo

    clock.set("2026-03-01T17:00:00Z")
    sunday = await engine.add_event("u", "2026-03-01", "聊了周日去爬山")
    before = await engine.add_event("u", "2026-02-20", "讨论了博客迁移")
    r = Retriever(engine)
    shanghai = await r.search_events("u", "上周我们聊了什么", tz=ZoneInfo("Asia/Shanghai"), period_only=True)
    assert [h.id for h in shanghai] == [sunday.id]
    assert [h.id for h in await r.search_events("u", "上周我们聊了什么", period_only=True)] == [before.id]


async def test_retrieve_returns_at_most_five_within_the_token_budget(engine: MemoryEngine) -> None:
    for i in range(12):
        await add(engine, "u", f"kubernetes note {i}: " + "pods restart on failure " * 30)
    r = Retriever(engine, token_budget=200)
    hits = await r.retrieve("u", "kubernetes pods")
    assert 1 <= len(hits) < 5  # 300 characters is ~80 tokens, so 200 tokens fit two
    assert len(await Retriever(engine).retrieve("u", "kubernetes pods")) == 5
    assert len(await r.retrieve("u", "kubernetes pods", limit=8)) == 8


async def test_tokenizer_change_reindexes_on_open(tmp_path, clock: ManualClock) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "m.db"
    async with await MemoryEngine.open(path, clock) as eng:
        mid = await add(eng, "u", "Alice prefers pnpm")
        async with eng.db.transaction() as conn:
            await conn.execute("UPDATE memories_fts SET text = 'alice prefers pnpm' WHERE rowid = ?", (mid,))
            await conn.execute("UPDATE meta SET value = 'old' WHERE key = 'tokenizer'")
    async with await MemoryEngine.open(path, clock) as eng:
        row = await eng.db.fetchone("SELECT value FROM meta WHERE key = 'tokenizer'")
        assert row is not None and row[0] == INDEX_VERSION
        assert await ids(Retriever(eng), "u", "preferred") == [mid]


# -- conversation turns: the answer follows the question ----------------------


async def _turns(engine: MemoryEngine, owner: str, chat: str, session: str, texts: list[str]) -> list[int]:
    prov = Provenance(channel="telegram", chat_id=chat, session=session)
    return [await add(engine, owner, t, category=Category.CONVERSATION, provenance=prov) for t in texts]


async def test_reply_to_a_matching_question_ranks_right_after_it(engine: MemoryEngine) -> None:
    await add(engine, "u", "Melanie: the house is quiet this week")
    await add(engine, "u", "Caroline: names are hard to pick for a band")
    ask, answer = await _turns(engine, "u", "42", "s1", [
        "Caroline: do you have pets? what are their names?",
        "Melanie: Luna and Oliver! They liven up the house.",
    ])
    r = Retriever(engine)
    # The answer also names Melanie: with its share of the question's score
    # it ranks first, the question right after it.
    assert (await ids(r, "u", "what are the names of Melanie's pets?"))[:2] == [answer, ask]
    ask_zh, answer_zh = await _turns(engine, "u", "43", "s1", ["你家的猫叫什么名字？", "咪咪，三岁了。"])
    await add(engine, "u", "猫粮在超市买的")
    assert (await ids(r, "u", "我家的猫叫什么名字"))[:2] == [ask_zh, answer_zh]


async def test_no_reply_credit_after_a_statement_or_across_chats(
    engine: MemoryEngine, monkeypatch: pytest.MonkeyPatch
) -> None:
    said = await _turns(engine, "u", "42", "s1", ["Caroline: my pets are called Luna and Oliver.",
                                                  "Melanie: nice, the weather is lovely today"])
    other = await _turns(engine, "u", "42", "s1", ["Caroline: what are the names of your pets?"])
    other += await _turns(engine, "u", "99", "s1", ["Bob: the weather is lovely today"])
    r = Retriever(engine)
    got = {h.id: h.score for h in await r.retrieve("u", "names of the pets", limit=10)}
    # Bob is in another chat: nothing. The follower of the statement holds no
    # query word: only the neighbour share of the two turns around it (the
    # statement and the question), no reply share.
    assert set(got) == {said[0], said[1], other[0]}
    monkeypatch.setattr(retrieval, "NEIGHBOUR_WEIGHT", 0.0)
    monkeypatch.setattr(retrieval, "REPLY_WEIGHT", 0.0)
    own = {h.id: h.score for h in await r.retrieve("u", "names of the pets", limit=10)}
    assert set(own) == {said[0], other[0]}
    assert got[said[1]] == pytest.approx(NEIGHBOUR_WEIGHT * (own[said[0]] + own[other[0]]))
    assert got[said[0]] == pytest.approx(own[said[0]] + NEIGHBOUR_WEIGHT * own[other[0]])


async def test_a_turn_borrows_from_the_turns_around_it(engine: MemoryEngine) -> None:
    # The answer (two turns after the turn naming the cafe, the other
    # speaker in between) shares one word with the question, as does a turn
    # of another chat; the turns around the answer decide.
    topic, _, answer = await _turns(engine, "u", "42", "s3", [
        "Andrew: we found a little cafe downtown with amazing pastries",
        "Audrey: that sounds lovely",
        "Andrew: I ordered croissants, muffins and tarts",
    ])
    elsewhere = await _turns(engine, "u", "42", "s9", ["Andrew: I ordered hiking boots"])
    await _turns(engine, "u", "42", "s9", ["Audrey: my dogs love the trail by the lake"])
    r = Retriever(engine)
    got = await ids(r, "u", "what did Andrew order at the cafe with the pastries?")
    assert got[:2] == [topic, answer] and got.index(answer) < got.index(elsewhere[0])
    zh_topic, _, zh_answer = await _turns(engine, "u", "43", "s1", [
        "周末去了新开的咖啡馆，甜点很好吃", "听起来不错", "点了提拉米苏和芒果蛋糕"])
    zh_else = await _turns(engine, "u", "43", "s2", ["点了登山鞋"])
    got = await ids(r, "u", "咖啡馆的甜点点了什么")
    assert got[:2] == [zh_topic, zh_answer] and got.index(zh_answer) < got.index(zh_else[0])


async def test_notes_and_facts_without_a_conversation_borrow_nothing(engine: MemoryEngine) -> None:
    a = await add(engine, "u", "the backup server is in Frankfurt")
    b = await add(engine, "u", "the office plants need water on Mondays")
    got = await Retriever(engine).retrieve("u", "where is the backup server?", limit=10)
    assert [h.id for h in got] == [a] and b not in [h.id for h in got]


# -- time references ----------------------------------------------------------


async def test_time_reference_favours_memories_of_that_period(engine: MemoryEngine, clock: ManualClock) -> None:
    # clock: 2026-03-01. Same words, different dates: the date decides.
    older = await add(engine, "u", "dentist appointment went fine", at="2025-11-12T09:00:00Z")
    feb = await add(engine, "u", "dentist appointment went fine, one filling", at="2026-02-10T09:00:00Z")
    await add(engine, "u", "bought a new dentist toothbrush", at="2026-02-11T09:00:00Z")
    r = Retriever(engine)
    assert (await ids(r, "u", "how did the dentist appointment go last month?"))[0] == feb
    assert (await ids(r, "u", "how did the dentist appointment go in November?"))[0] == older
    zh_old = await add(engine, "u", "去医院体检，血压正常", at="2025-06-01T09:00:00Z")
    zh_new = await add(engine, "u", "去医院体检，血压有点高", at="2026-02-20T09:00:00Z")
    assert (await ids(r, "u", "去年体检的结果怎么样"))[0] == zh_old
    assert (await ids(r, "u", "上个月体检的结果怎么样"))[0] == zh_new


async def test_yesterday_is_the_users_own_day_in_their_zone(engine: MemoryEngine, clock: ManualClock) -> None:
    """04:30 on the 2nd in Shanghai is 20:30 on the 1st UTC: their
    "yesterday" is their 1st (16:00 UTC on the 28th to 16:00 on the 1st);
    UTC's is the 28th."""
    from zoneinfo import ZoneInfo

    clock.set("2026-03-01T20:30:00Z")
    theirs = await add(engine, "u", "lunch with Wei at the noodle bar", at="2026-03-01T04:00:00Z")  # 12:00 on the 1st, local
    utcs = await add(engine, "u", "lunch with Wei, dumplings this time", at="2026-02-28T10:00:00Z")  # 18:00 on the 28th
    r = Retriever(engine)
    assert (await ids(r, "u", "where did I have lunch with Wei yesterday?", tz=ZoneInfo("Asia/Shanghai")))[0] == theirs
    assert (await ids(r, "u", "where did I have lunch with Wei yesterday?"))[0] == utcs


async def test_irregular_past_tense_finds_the_memory(engine: MemoryEngine) -> None:
    target = await add(engine, "u", "I bought a blue jacket at the market last spring")
    await add(engine, "u", "my jacket is too small")
    await add(engine, "u", "the children went to the market")
    r = Retriever(engine)
    assert (await ids(r, "u", "which jacket did I buy?"))[0] == target
    assert (await ids(r, "u", "where did the kids' children go?"))[0] != target


async def test_a_time_reference_alone_finds_that_days_memories(engine: MemoryEngine, clock: ManualClock) -> None:
    # No word of the message is in any memory: the time reference is the
    # only term, and the rows written in that period its only candidates.
    old = await add(engine, "u", "我们讨论了数据库迁移", at="2026-02-20T10:00:00Z")
    today = await add(engine, "u", "我们讨论了部署流程", at=clock.now().strftime("%Y-%m-%dT08:00:00Z"))
    await add(engine, "v", "别人的今天", at=clock.now().strftime("%Y-%m-%dT09:00:00Z"))
    assert await ids(Retriever(engine), "u", "今天天气不错，你还记得吗") == [today]
    assert old not in await ids(Retriever(engine), "u", "what did we talk about today?")


async def test_a_user_among_many_gets_the_same_ranking_with_owner_scoped_terms(
    engine: MemoryEngine, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Every user has the same words (the worst case for unscoped postings);
    # scoping each term's MATCH to the owner must not change the answer.
    for u in range(30):
        await engine.add_many(
            (NewMemory(owner=f"user{u}", content=text), None)
            for text in (f"I like oat milk flat white coffee number {u}", "we chose Postgres as the database",
                         "my cat is called Mochi", "weekend hiking by the lake")
        )
    mine = await add(engine, "user7", "the database password rotates every month")
    r = Retriever(engine, candidates=3)  # fewer than the user's 5 rows: matched, not all read
    queries = ["which database did we choose?", "do you remember my coffee order", "database password?", "猫叫什么"]
    monkeypatch.setattr(retrieval, "SCOPED_TERMS_SHARE", 1.01)  # always scoped per term
    scoped = [[(h.id, round(h.score, 9)) for h in await r.retrieve("user7", q, limit=10)] for q in queries]
    monkeypatch.setattr(retrieval, "SCOPED_TERMS_SHARE", 0.0)  # never: scope the OR of all terms once
    whole = [[(h.id, round(h.score, 9)) for h in await r.retrieve("user7", q, limit=10)] for q in queries]
    assert scoped == whole
    assert scoped[2][0][0] == mine
    own = {m.id for m in await engine.list_memories("user7", limit=100)}
    assert all(h_id in own for hits in scoped for h_id, _ in hits)  # never another user's row


async def test_a_user_whose_rows_rank_below_everyone_elses_still_gets_them(
    engine: MemoryEngine, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Postings are ranked for everyone, then kept for the asking user; here
    # the first ranks all belong to others (two query words against one),
    # so the ranking must be run again whole instead of returning nothing.
    await engine.add_many(
        (NewMemory(owner=f"other{u % 5}", content=f"database password note {u}"), None) for u in range(75)
    )
    await engine.add_many((NewMemory(owner="me", content=f"database choice number {u}"), None) for u in range(25))
    r = Retriever(engine, candidates=4)
    monkeypatch.setattr(retrieval, "SCOPED_TERMS_SHARE", 0.0)  # rank first, then scope
    whole = [(h.id, round(h.score, 9)) for h in await r.retrieve("me", "database password?", limit=4)]
    monkeypatch.setattr(retrieval, "WHOLE_RANKING", 0)  # only the top ranks' owners are checked: too few
    ranked = [(h.id, round(h.score, 9)) for h in await r.retrieve("me", "database password?", limit=4)]
    monkeypatch.setattr(retrieval, "SCOPED_TERMS_SHARE", 1.01)  # each term's MATCH scoped to the owner
    scoped = [(h.id, round(h.score, 9)) for h in await r.retrieve("me", "database password?", limit=4)]
    own = {m.id for m in await engine.list_memories("me", limit=100)}
    assert len(ranked) == 4 and ranked == scoped == whole
    assert all(i in own for i, _ in ranked)


async def test_a_word_first_seen_in_no_memory_is_found_once_a_memory_has_it(engine: MemoryEngine) -> None:
    # Terms in no row are remembered until the index changes: a memory
    # written afterwards must still be found by the same retriever.
    await add(engine, "u", "we chose Postgres as the database")
    r = Retriever(engine)
    assert await ids(r, "u", "what about the kayak trip?") == []
    kayak = await add(engine, "u", "the kayak trip is on Saturday")
    assert (await ids(r, "u", "what about the kayak trip?"))[0] == kayak
    await engine.set_status(kayak, "archived")
    assert kayak not in await ids(r, "u", "what about the kayak trip?")


async def test_a_message_of_known_words_reads_no_statistics_again(engine: MemoryEngine) -> None:
    await add(engine, "u", "we chose Postgres as the database")
    r = Retriever(engine)
    statements: list[str] = []
    fetch = r._fetch

    async def counted(sql: str, params: object) -> object:
        statements.append(sql)
        return await fetch(sql, params)  # type: ignore[arg-type]

    r._fetch = counted  # type: ignore[method-assign]
    first = await r.retrieve("u", "which database did we choose? kayak")
    n = len(statements)
    again = await r.retrieve("u", "which database did we choose? kayak")
    assert again == first and len(statements) - n == n - 1  # all but the statistics statement
    assert not any("_vocab" in sql for sql in statements[n:])


async def test_a_user_among_many_is_matched_on_every_word_everyone_shares(engine: MemoryEngine) -> None:
    # 400 users with the same five memories: every word is in 400 rows, so
    # the collection-wide counts of a five-word question exceed the MATCH's
    # posting budget; this user's share of them is five rows, and a memory
    # holding only the fifth word must still be found.
    texts = ["oat milk flat white coffee", "we chose Postgres as the database", "my cat is called Mochi",
             "weekend hiking by the lake", "the violin lesson is on Tuesday"]
    for u in range(400):
        await engine.add_many((NewMemory(owner=f"user{u}", content=t), None) for t in texts)
    r = Retriever(engine)
    got = await ids(r, "user7", "coffee database cat hiking violin?")
    mine = {m.content: m.id for m in await engine.list_memories("user7", limit=10)}
    assert set(got) == set(mine.values())


async def test_a_user_with_few_memories_gets_the_same_ranking_read_whole(engine: MemoryEngine) -> None:
    # Up to `candidates` memories in scope, all of them are read by owner
    # instead of matched term by term; with more candidates than rows
    # holding a query word, the two ways must agree.
    for u in range(20):
        await engine.add_many((NewMemory(owner=f"other{u}", content=f"we chose Postgres as the database {u}"), None) for _ in range(1))
    for text in ("we chose Postgres as the database", "the database password rotates monthly", "我的猫叫麻薯",
                 "the cat sleeps on the database server", "weekend hiking by the lake", "violin lesson on Tuesday",
                 "今天部署了新版本", "Postgres backups run nightly"):
        await add(engine, "me", text)
    for q in ["which database did we choose?", "猫叫什么", "when do Postgres backups run?", "hiking"]:
        whole = [(h.id, round(h.score, 9)) for h in await Retriever(engine, candidates=8).retrieve("me", q, limit=10)]
        matched = [(h.id, round(h.score, 9)) for h in await Retriever(engine, candidates=7).retrieve("me", q, limit=10)]
        assert whole and whole == matched, q


async def test_a_renamed_projects_old_facts_count_for_its_new_name(engine: MemoryEngine) -> None:
    """"We renamed atlas to orion": asked about orion, recall took atlas's
    facts for another project's (x0.8) and matched none of their words;
    with the alias (the facts now filed under orion), either name finds
    them, first."""
    old = await add(engine, "alice", "atlas stores its data in Postgres", project="atlas")
    other = await add(engine, "alice", "webshop stores its data in MySQL", project="webshop")
    await add(engine, "alice", "webshop deploys on Fridays", project="webshop")
    bobs = await add(engine, "bob", "atlas stores its data in SQLite", project="atlas")
    r = Retriever(engine)
    assert (await ids(r, "alice", "where does orion store its data?"))[0] == other  # before: nothing links them

    renamed = await engine.set_project_alias("alice", "Atlas", "orion", source="manual")
    assert (renamed.old, renamed.new, renamed.moved) == ("atlas", "orion", 1)
    assert {"atlas", "orion", "webshop"} <= await engine.known_projects("alice")
    for q in ("where does orion store its data?", "where does atlas store its data?"):
        got = await ids(r, "alice", q)
        assert got[0] == old and other in got, q
    # Alice's alias is hers alone: bob's atlas is no orion.
    assert await engine.project_aliases("bob") == {} and "orion" not in await engine.known_projects("bob")
    assert not await retrieval.named_projects(engine, "bob", "where does orion store its data?")
    assert bobs in await ids(r, "bob", "where does atlas store its data?")
    # A later rename carries the old name along; a rename back drops the self-link.
    await engine.set_project_alias("alice", "orion", "nova", source="manual")
    assert await engine.project_aliases("alice") == {"atlas": "nova", "orion": "nova"}
    assert (await ids(r, "alice", "where does nova store its data?"))[0] == old
    await engine.set_project_alias("alice", "nova", "atlas", source="manual")
    assert await engine.project_aliases("alice") == {"nova": "atlas", "orion": "atlas"}
    with pytest.raises(ValueError, match="renamed to itself"):
        await engine.set_project_alias("alice", "atlas", "ATLAS", source="manual")
    with pytest.raises(ValueError, match="not a project name"):
        await engine.set_project_alias("alice", "atlas", "  ", source="manual")
    assert await engine.remove_project_alias("alice", "nova") and not await engine.remove_project_alias("alice", "nova")
    await engine.forget_owner("alice")
    assert await engine.project_aliases("alice") == {}


async def test_a_hit_brought_in_as_a_neighbour_says_so(engine: MemoryEngine) -> None:
    # The answer holds no query word: it is context for the question's hit, not a match.
    ask, answer = await _turns(engine, "u", "42", "s1", ["what is your cat called?", "Miso, she is three"])
    lone = await add(engine, "u", "the neighbour's cat sleeps on our car")
    hits = {h.id: h for h in await Retriever(engine).retrieve("u", "cat", limit=10)}
    assert set(hits) == {ask, answer, lone}
    assert hits[answer].neighbour and not hits[ask].neighbour and not hits[lone].neighbour


# -- what a fact is found by besides its words (issue 5) ----------------------

POSTGRES = "We picked Postgres over MySQL"


async def test_a_chinese_question_finds_an_english_fact_by_its_search_terms(engine: MemoryEngine) -> None:
    """No embeddings, no LLM on the read path: the extraction model gave the
    fact search terms in both languages, indexed with it."""
    target = await add(engine, "alice", POSTGRES, search_terms=("数据库", "database", "Postgres", "选型"))
    for text in ["周末我们去爬山了", "我喜欢蓝色的外套", "午饭吃了牛肉面", "Alice drinks coffee every morning"]:
        await add(engine, "alice", text)
    bare = await add(engine, "carol", POSTGRES)  # the same fact without terms: no word of the question
    r = Retriever(engine)
    assert (await ids(r, "alice", "数据库我们最后选了什么？"))[0] == target
    assert (await ids(r, "alice", "which database did we choose?"))[0] == target
    assert bare not in await ids(r, "carol", "数据库我们最后选了什么？")
    # Stored apart from the fact, never shown as it.
    [hit] = [h for h in await r.retrieve("alice", "数据库") if h.id == target]
    assert hit.content == POSTGRES
    m = await engine.get(target)
    assert m is not None and m.content == POSTGRES and m.search_terms == ("数据库", "database", "Postgres", "选型")


async def test_a_topic_or_project_label_finds_a_fact_whose_words_never_say_it(engine: MemoryEngine) -> None:
    db = await add(engine, "alice", POSTGRES, project="webshop", topic="database")
    await add(engine, "alice", "Alice drinks coffee every morning")
    await add(engine, "alice", "The cat is called Miso")
    r = Retriever(engine)
    assert (await ids(r, "alice", "what did we decide about the database?"))[0] == db
    assert (await ids(r, "alice", "anything about the webshop?"))[0] == db
    # An edited label is what the fact is found by.
    await engine.update(db, topic="storage")
    assert db not in await ids(r, "alice", "what did we decide about the database?")
    assert (await ids(r, "alice", "what about storage?"))[0] == db


async def test_a_label_or_term_never_outranks_a_fact_that_says_the_word(engine: MemoryEngine) -> None:
    labelled = await add(engine, "alice", POSTGRES, topic="database")
    termed = await add(engine, "alice", "We kept Redis for the session cache", search_terms=("database",))
    says = await add(engine, "alice", "The database backups run every night")
    r = Retriever(engine)
    got = await ids(r, "alice", "what about the database?")
    assert got[0] == says and set(got[1:3]) == {labelled, termed}
    hits = await r.retrieve("alice", "what about the database?")
    assert hits[0].score > 2 * max(h.score for h in hits[1:])  # a cue helps, at a low weight
    # The word said and labelled counts once, as said: no double count.
    both = await add(engine, "alice", "The database backups run every week", topic="database")
    scores = {h.id: h.score for h in await r.retrieve("alice", "what about the database?")}
    assert scores[both] == pytest.approx(scores[says], rel=0.01)


async def test_a_renamed_projects_facts_are_found_by_its_current_name_only_while_it_holds(engine: MemoryEngine) -> None:
    fact = await add(engine, "alice", "Deploys go out on Fridays", project="atlas")
    await add(engine, "alice", "Alice drinks coffee every morning")
    r = Retriever(engine)
    assert fact in await ids(r, "alice", "how does atlas ship?", projects=())
    await engine.set_project_alias("alice", "atlas", "orion", source="manual")
    # Filed under orion, indexed under orion (projects=(): no alias lookup helps).
    assert fact in await ids(r, "alice", "how does orion ship?", projects=())
    await engine.remove_project_alias("alice", "atlas")
    assert fact not in await ids(r, "alice", "how does orion ship?", projects=())
    assert fact in await ids(r, "alice", "how does atlas ship?", projects=())


HOSTILE = ('" OR owner : *', "NEAR(a b)", ")", "*", "x" * 5000, "\x00", "text : 秘密", "^start", "-", "  ", "AND")


async def test_hostile_search_terms_never_break_the_index_or_another_users_recall(engine: MemoryEngine) -> None:
    target = await add(engine, "alice", POSTGRES, search_terms=(*HOSTILE, "数据库"))
    bobs = await add(engine, "bob", "Bob runs the ledger on SQLite", search_terms=("数据库", "database"))
    r = Retriever(engine)
    for q in (*HOSTILE, "数据库", "owner", "near"):
        got = await ids(r, "alice", q)
        assert bobs not in got, q
    assert (await ids(r, "alice", "数据库"))[0] == target
    assert await ids(r, "bob", "数据库") == [bobs]
    m = await engine.get(target)
    assert m is not None and len(m.search_terms) <= 12 and all(len(t) <= 40 for t in m.search_terms)
    assert "\x00" not in "".join(m.search_terms) and "" not in m.search_terms


async def test_erasing_a_fact_erases_its_search_terms(engine: MemoryEngine) -> None:
    target = await add(engine, "alice", POSTGRES, search_terms=("数据库", "zanzibarite"))
    r = Retriever(engine)
    assert await ids(r, "alice", "zanzibarite") == [target]
    await engine.delete(target)
    await engine.purge_erased()
    assert await ids(r, "alice", "zanzibarite") == []
    assert await engine.db.fetchone("SELECT 1 FROM memories_vocab WHERE term = 'zanzibarit'") is None


async def test_now_in_a_question_does_not_recall_a_fact_saying_now(engine: MemoryEngine) -> None:
    fish = await add(engine, "alice", "I eat fish again now")
    risotto = await add(engine, "alice", "Alice likes to cook mushroom risotto on weekends")
    await add(engine, "alice", "Alice's sister lives in Lyon")
    r = Retriever(engine)
    got = await ids(r, "alice", "what should I cook right now?")
    assert got[0] == risotto and fish not in got, got
    zh_fish = await add(engine, "alice", "我现在又开始吃鱼了")
    zh_cook = await add(engine, "alice", "周末喜欢做蘑菇烩饭")
    got = await ids(r, "alice", "我现在该做什么饭？")
    assert got[0] == zh_cook and zh_fish not in got, got
    # Asked by its other words, a current-state fact is found as before.
    assert (await ids(r, "alice", "what am I eating now?"))[0] == fish
    assert (await ids(r, "alice", "我现在吃什么？"))[0] == zh_fish
    # Nothing but the frame to go by ("doing" is a stop word): "now" is kept.
    assert (await ids(r, "alice", "what am I doing now?"))[0] == fish


async def test_today_as_a_frame_still_prefers_todays_memory(engine: MemoryEngine, clock: ManualClock) -> None:
    # "today" / 今天 are cut from the topic words (§3) but still name the
    # day (memory/timeref.py): of two meals, today's comes first, though the
    # older line, shorter, holds the same word more strongly. (A line of
    # today three times as long still loses to a short old one sharing the
    # phrase 中午吃了: one dated term against BM25's length; RETRIEVAL.md §9.)
    clock.set("2026-03-01T09:00:00Z")
    ramen = await add(engine, "alice", "Alice ate ramen")
    zh_old = await add(engine, "alice", "中午吃了拉面")
    clock.set("2026-03-04T13:00:00Z")
    salad = await add(engine, "alice", "Alice ate a big green salad with grilled chicken at the office canteen")
    zh_new = await add(engine, "alice", "中午吃了鸡肉沙拉")
    clock.set("2026-03-04T19:00:00Z")
    r = Retriever(engine)
    # Without the day, the older, shorter line ranks first: the date does the work.
    assert (await ids(r, "alice", "what did I eat?"))[0] == ramen
    assert (await ids(r, "alice", "我中午吃了什么？"))[0] == zh_old
    assert (await ids(r, "alice", "what did I eat today?"))[0] == salad
    assert (await ids(r, "alice", "我今天中午吃了什么？"))[0] == zh_new


async def test_chinese_conjunctions_and_adverbs_are_no_topic(engine: MemoryEngine) -> None:
    # 因为, 已经, 但是 say how a sentence hangs together, not what it is
    # about: a memory holding them is no answer to a question about kites.
    glue = await add(engine, "u", "因为已经下雨了，但是我们还是出门了")
    kite = await add(engine, "u", "周末在公园和朋友一起放了一下午的风筝，玩得很开心")
    await add(engine, "u", "数据库用的是 PostgreSQL 15")
    r = Retriever(engine)
    got = await ids(r, "u", "但是因为我已经很想放风筝了")
    assert got[0] == kite and glue not in got[:1], got


async def test_its_in_a_message_does_not_recall_a_memory_for_it(engine: MemoryEngine) -> None:
    # "It's so expensive!" asks about the price; "it" is a stop word
    # however it is written, and a short memory holding "it" twice is no
    # answer.
    fixed = await add(engine, "alice", "Bob fixed it, it works")
    laptop = await add(engine, "alice", "The laptop Alice bought last month at the mall was expensive for her budget")
    await add(engine, "alice", "Alice walks her dog every evening")
    r = Retriever(engine)
    got = await ids(r, "alice", "It's so expensive!")
    assert got[0] == laptop and fixed not in got, got
    assert (await ids(r, "alice", "She’s really expensive"))[0] == laptop


_SEEDED = """
import asyncio, sys
from memory import ManualClock, MemoryEngine, NewMemory
from memory.retrieval import Retriever

async def main() -> None:
    engine = await MemoryEngine.open(sys.argv[1], ManualClock("2026-03-01T12:00:00Z"))
    terms = ("database", "postgres", "schema", "migration", "index", "replica", "backup", "vacuum", "shard",
             "cluster", "query", "planner")
    await engine.add(NewMemory(owner="alice", content="We picked a store for the ledger", search_terms=terms))
    for i in range(1, len(terms)):  # each term in its own number of other memories: weights all different
        await engine.add(NewMemory(owner="alice", content=f"note {i} on " + " and ".join(terms[:i])))
    hits = await Retriever(engine).retrieve("alice", "ledger " + " ".join(terms))
    print(" ".join(h.score.hex() for h in hits))
    await engine.close()

asyncio.run(main())
"""


def test_a_score_is_the_same_in_every_process(tmp_path: Path) -> None:
    """A memory's search terms were summed in a set's order, which follows
    Python's per-process string hashing: the same query scored a last bit
    apart from one run to the next, and a tie at the cut could flip. Summed
    in the order they were written, it is one score."""
    scores = set()
    for seed in ("1", "2", "3", "4", "5", "6"):
        db = tmp_path / f"m{seed}.db"
        out = subprocess.run([sys.executable, "-c", _SEEDED, str(db)], capture_output=True, text=True, check=True,
                             env={**os.environ, "PYTHONHASHSEED": seed})
        scores.add(out.stdout.strip())
    assert len(scores) == 1 and next(iter(scores)), scores
