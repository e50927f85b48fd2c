from __future__ import annotations

import json

import pytest
from structlog.testing import capture_logs

from memory.llm import (
    Candidate,
    LLMBadOutput,
    LLMUnavailable,
    MAX_FACT_CHARS,
    MemoryLLM,
    normalize_fact,
    parse_json_object,
    slug,
)
from memory.types import Category
from tests.fakes.openai_server import FakeOpenAI, Reply

from ._writepath import fake, llm, reply, user_prompt  # noqa: F401


@pytest.mark.parametrize(
    "text",
    [
        '{"facts": [], "summary": "s"}',
        '```json\n{"facts": [], "summary": "s"}\n```',
        'Sure! Here is the JSON:\n```\n{"facts": [], "summary": "s"}\n```\nHope it helps.',
        'Here you go: {"facts": [], "summary": "s"} -- done',
        'noise {not json} then {"facts": [], "summary": "s"}',
    ],
)
def test_parse_json_object_finds_the_object(text: str) -> None:
    assert parse_json_object(text) == {"facts": [], "summary": "s"}


@pytest.mark.parametrize("text", ["", "   ", "no json here", "[1, 2]", '{"facts": [', "```json\n```"])
def test_parse_json_object_rejects_garbage(text: str) -> None:
    with pytest.raises(LLMBadOutput):
        parse_json_object(text)


def test_normalize_repairs_what_it_can() -> None:
    f = normalize_fact(
        {"content": "  User   uses pnpm ", "category": "Preferences", "importance": 7, "project": "My Claw!", "topic": None}
    )
    assert f is not None
    assert (f.content, f.category, f.importance, f.project, f.topic) == (
        "User uses pnpm", Category.IDENTITY, 1.0, "my-claw", "_general"
    )
    assert normalize_fact({"content": "x", "category": "weird", "importance": -3}).category is Category.EVENT  # type: ignore[union-attr]
    assert normalize_fact({"content": "x", "importance": -3}).importance == 0.0  # type: ignore[union-attr]
    assert normalize_fact({"content": "x", "importance": "high"}).importance == 0.8  # type: ignore[union-attr]
    assert normalize_fact({"content": "x", "importance": "80%"}).importance == 0.8  # type: ignore[union-attr]
    assert normalize_fact({"content": "x", "category": "decision", "importance": [1]}).importance == 0.8  # type: ignore[union-attr]
    assert normalize_fact("a bare string fact").content == "a bare string fact"  # type: ignore[union-attr]
    assert normalize_fact({"content": "x", "same_as": "2", "updates": True}).same_as == 2  # type: ignore[union-attr]


@pytest.mark.parametrize("raw", [None, 3, [], {"content": ""}, {"content": {"a": 1}}, {"category": "identity"}])
def test_normalize_rejects_what_it_cannot(raw: object) -> None:
    assert normalize_fact(raw) is None


def test_over_long_content_is_cut_at_a_boundary() -> None:
    text = "用户喜欢喝咖啡。" * 60
    f = normalize_fact({"content": text})
    assert f is not None and len(f.content) <= MAX_FACT_CHARS and f.content.endswith("。")
    en = normalize_fact({"content": "word " * 200})
    assert en is not None and len(en.content) <= MAX_FACT_CHARS and not en.content.endswith(" ")


def test_slug() -> None:
    assert slug("Deploy / CI", "_general") == "deploy-ci"
    assert slug("部署 流程", "_general") == "部署-流程"
    assert slug("x" * 100, "_g") == "x" * 32
    assert slug(42, "_g") == "_g" and slug("  ", "_g") == "_g"


async def test_extract_over_http_sends_json_mode_and_language(fake: FakeOpenAI, llm: MemoryLLM) -> None:
    fake.queue_reply(
        "```json\n"
        + reply(
            [
                {"content": "用户搬到了上海", "category": "identity", "importance": 1.5, "project": "", "updates": 1},
                {"content": "", "category": "event"},
                {"content": "用户用 pnpm", "category": "tooling", "same_as": 9},
            ],
            summary="用户说他搬家了",
        )
        + "\n```"
    )
    out = await llm.extract("[t] user: 我搬到上海了", [Candidate(1, "用户住在北京", "identity", 1.0)])
    body = fake.requests[-1]
    assert body["response_format"] == {"type": "json_object"} and body["temperature"] <= 0.3
    assert body["model"] == "mem-model"
    assert fake.headers[-1]["Authorization"] == "Bearer sk-test-000000"
    system = body["messages"][0]["content"]
    assert "same language as the conversation" in system and "Never translate" in system
    assert "mainly in Chinese" in user_prompt(body) and "1. [identity, 1.0] 用户住在北京" in user_prompt(body)
    assert [f.content for f in out.facts] == ["用户搬到了上海", "用户用 pnpm"]
    assert out.facts[0].importance == 1.0 and out.facts[0].updates == 1 and out.facts[0].project == "_global"
    assert out.facts[1].category is Category.EVENT and out.facts[1].same_as is None  # 9 > N: dropped
    assert out.summary == "用户说他搬家了"
    assert llm.usage.calls == 1 and llm.usage.prompt_tokens > 0


def test_fact_lines_are_repaired_and_capped() -> None:
    def lines(raw: object) -> tuple[int, ...]:
        f = normalize_fact({"content": "x", "lines": raw})
        assert f is not None
        return f.lines

    assert lines([2, "L3", "#4", 2]) == (2, 3, 4)
    assert lines("L1, L2") == (1, 2) and lines(5) == (5,) and lines("l7") == (7,)
    assert lines([0, -1, True, None, "x", 1.5, {"n": 1}]) == ()
    assert lines(None) == () and lines(list(range(1, 20))) == (1, 2, 3, 4)  # a fact cites a line or two
    assert normalize_fact({"content": "x", "same_as": "L3"}).same_as is None  # type: ignore[union-attr]  # a line, not a memory


async def test_extract_asks_for_search_terms_in_both_languages_and_keeps_clean_ones(
    fake: FakeOpenAI, llm: MemoryLLM
) -> None:
    fake.queue_reply(reply([
        {"content": "We picked Postgres over MySQL", "lines": [1], "terms": ["数据库", "database", "选型", "x" * 99]},
        {"content": "User likes tea", "terms": "茶, tea"},
        {"content": "User has a cat", "terms": [{"$ne": 1}, None, 7]},
        {"content": "User has a dog"},
    ]))
    out = await llm.extract(["[t] user: we went with Postgres over MySQL in the end"])
    system = fake.requests[-1]["messages"][0]["content"]
    assert '"terms"' in system and "Chinese and English" in system
    assert [f.terms for f in out.facts] == [("数据库", "database", "选型"), ("茶", "tea"), (), ()]


async def test_extract_numbers_the_lines_and_drops_lines_it_never_showed(fake: FakeOpenAI, llm: MemoryLLM) -> None:
    fake.queue_reply(reply([{"content": "用户搬到了上海", "lines": [1, 3]}, {"content": "用户用 pnpm", "lines": ["L2"]}]))
    out = await llm.extract(["[t] user: 我搬到上海了", "[t] user: 以后用 pnpm"])
    prompt = user_prompt(fake.requests[-1])
    assert "L1 [t] user: 我搬到上海了\nL2 [t] user: 以后用 pnpm" in prompt and "mainly in Chinese" in prompt
    assert [f.lines for f in out.facts] == [(1,), (2,)]  # L3 was never shown


async def test_extract_prompt_says_a_request_to_forget_is_no_fact(fake: FakeOpenAI, llm: MemoryLLM) -> None:
    """A crash can leave a `memory_forget` turn to be buffered after all
    (gateway/loop.py): the model is the last line that keeps the fact out."""
    fake.queue_reply(reply([]))
    await llm.extract("[t] user: forget that my cat is called Miso")
    system = fake.requests[-1]["messages"][0]["content"]
    assert "Never store a fact from a request to forget" in system


async def test_extract_english_prompt_says_english(fake: FakeOpenAI, llm: MemoryLLM) -> None:
    fake.queue_reply(reply([{"content": "User prefers dark mode"}]))
    await llm.extract("[t] user: I prefer dark mode, remember that")
    assert "mainly in English" in user_prompt(fake.requests[-1])


async def test_reply_without_facts_or_summary_is_bad_output(fake: FakeOpenAI, llm: MemoryLLM) -> None:
    fake.queue_reply(json.dumps({"answer": 42}))
    with pytest.raises(LLMBadOutput):
        await llm.extract("hello")
    fake.queue_reply("I cannot do that.")
    with pytest.raises(LLMBadOutput):
        await llm.extract("hello")


async def test_http_errors_and_timeouts_are_unavailable(fake: FakeOpenAI) -> None:
    client = MemoryLLM(base_url=fake.url, model="m", timeout=0.3, retries=0)
    try:
        fake.queue_error(500)
        with pytest.raises(LLMUnavailable, match="HTTP 500"):
            await client.extract("hi")
        fake.queue_delay(2.0)
        with pytest.raises(LLMUnavailable, match="timeout"):
            await client.extract("hi")
    finally:
        await client.aclose()
    dead = MemoryLLM(base_url="http://127.0.0.1:9/v1", model="m", timeout=0.5, retries=0)
    try:
        with pytest.raises(LLMUnavailable, match="transport"):
            await dead.extract("hi")
    finally:
        await dead.aclose()


async def test_retries_a_transient_error(fake: FakeOpenAI) -> None:
    client = MemoryLLM(base_url=fake.url, model="m", retries=1, retry_delay=0.01)
    try:
        fake.queue_error(503)
        fake.queue_reply(reply([{"content": "fact"}]))
        out = await client.extract("hi")
        assert [f.content for f in out.facts] == ["fact"] and client.usage.calls == 2
    finally:
        await client.aclose()


async def test_merge_accounts_sources_and_drops(fake: FakeOpenAI, llm: MemoryLLM) -> None:
    fake.queue_reply(
        json.dumps(
            {
                "facts": [
                    {"content": "uses pnpm", "category": "decision", "from": [1, 2, 99]},
                    {"content": "the invented door code is 4711", "from": []},
                    {"content": "kept", "from": "3"},
                ],
                "drop": [{"n": 4, "reason": "obsolete"}, {"n": 7}, 5],
            }
        )
    )
    with capture_logs() as logs:
        res = await llm.merge([Candidate(i, f"f{i}") for i in range(1, 6)])
    assert [(m.fact.content, m.sources) for m in res.facts] == [("uses pnpm", (1, 2)), ("kept", (3,))]
    rejected = [e for e in logs if "without sources" in e["event"]]
    assert len(rejected) == 1 and "4711" not in json.dumps(logs)  # logged, but not its words
    assert res.dropped == {4: "obsolete", 5: "no reason given"}


async def test_from_config_falls_back_to_main_provider() -> None:
    from gateway.config import validate

    cfg = validate({"provider": {"apiKey": "sk-main-xxxxxx", "baseUrl": "http://127.0.0.1:1/v1"},
                    "agent": {"model": "big", "maxTokens": 999}, "memory": {"model": "small"}})
    async with MemoryLLM.from_config(cfg) as client:
        assert (client.model, client.max_tokens) == ("small", 999)
        assert str(client._client.base_url) == "http://127.0.0.1:1/v1/"


async def test_responses_leave_no_reference_cycle(fake: FakeOpenAI, llm: MemoryLLM) -> None:
    # The gateway collects cycles rarely (gateway/runtime.py): a request and
    # response kept alive by a cycle held the prompt's JSON until then.
    import gc

    import httpx

    fake.queue_reply(reply([], summary="s"))
    await llm.complete_json("system", "user " * 1000)  # the pool's first connection, outside the count
    fake.queue_reply(reply([], summary="s"))
    gc.collect()
    gc.disable()
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        await llm.complete_json("system", "user " * 1000)
        gc.collect()
        cyclic = [type(o).__name__ for o in gc.garbage if isinstance(o, httpx.Request | httpx.Response)]
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        gc.enable()
    assert cyclic == []


async def test_a_reply_cut_at_max_tokens_is_an_overflow_not_retried(fake: FakeOpenAI) -> None:
    """``finish_reason: "length"``: the reply was cut at ``max_tokens``, and
    the same input would be cut the same way: not retried, and said as
    such (its shape, never its words) so the caller can ask with less."""
    from memory.llm import LLMOverflow
    from tests.fakes.openai_server import Reply

    client = MemoryLLM(base_url=fake.url, model="m", retries=2, retry_delay=0.01)
    try:
        fake.queue(Reply(content='{"facts": [{"content": "the locker code is 4242', finish_reason="length"))
        with pytest.raises(LLMOverflow, match="max_tokens") as err:
            await client.extract("my locker code is 4242")
        assert "4242" not in str(err.value) and len(fake.requests) == 1
        # Cut at the limit even though what came parses: a part of the facts is not the facts.
        fake.queue(Reply(content=reply([{"content": "fact"}]), finish_reason="length"))
        with pytest.raises(LLMOverflow):
            await client.extract("hi")
    finally:
        await client.aclose()


async def test_a_prompt_over_the_context_is_an_overflow_not_retried(fake: FakeOpenAI) -> None:
    from memory.llm import LLMOverflow

    client = MemoryLLM(base_url=fake.url, model="m", retries=2, retry_delay=0.01)
    try:
        fake.context_windows["m"] = 100  # under max_tokens alone: every request is refused
        with pytest.raises(LLMOverflow, match="context") as err:
            await client.extract("hi")
        assert err.value.status == 400 and len(fake.refused) == 1
    finally:
        await client.aclose()


async def test_an_html_error_page_is_read_as_its_words(fake: FakeOpenAI) -> None:
    from tests.fakes.openai_server import Reply

    page = ("<html><head><title>502 Bad Gateway</title><style>body{color:red}</style></head>"
            "<body><h1>Bad Gateway</h1><p>cloudflare</p><script>var k='sk-test-000000'</script></body></html>")
    client = MemoryLLM(base_url=fake.url, model="m", api_key="sk-test-000000", retries=0)
    try:
        fake.queue(Reply(status=502, raw=page, content_type="text/html"))
        with pytest.raises(LLMUnavailable) as err:
            await client.extract("hi")
    finally:
        await client.aclose()
    assert err.value.text == "502 Bad Gateway Bad Gateway cloudflare" and "<" not in str(err.value)


async def test_an_error_that_echoes_the_prompt_carries_no_user_words(fake: FakeOpenAI, llm: MemoryLLM) -> None:
    """The memory model's prompt is people's conversations: a provider
    quoting it back in an error must not carry it into the error's text
    (logged, and kept as the batch's last error)."""
    secret = "Hannelore owes 4823 euros to the Zürich clinic"

    def echoing(body: dict[str, object]) -> Reply:
        sent = json.dumps(body["messages"], ensure_ascii=False)
        return Reply(content=None, status=503, error_body=f"upstream rejected “{secret}” in {sent[-300:]}",
                     error_type="server_error", error_code="overloaded")

    fake.responder = echoing
    with pytest.raises(LLMUnavailable) as err:
        await llm.extract(f"[1] user: {secret}")
    for word in ("Hannelore", "4823", "Zürich", "clinic"):
        assert word not in str(err.value)
    assert "HTTP 503" in str(err.value) and "overloaded" in str(err.value)


# -- a model's reply names its keys in a log line only when they are the schema's --------


async def test_a_reply_with_the_users_words_as_its_keys_is_refused_without_them(
    fake: FakeOpenAI, llm: MemoryLLM
) -> None:
    """A model may echo the conversation as a key ("my pin is 8806"): the
    error (kept as a batch's last error, logged) and the fact-rejected
    line name the schema's keys and count the others."""
    fake.queue_reply(json.dumps({"my pin is 8806": "remember it", "notes": 1}))
    with capture_logs() as logs, pytest.raises(LLMBadOutput) as err:
        await llm.extract("alice: my pin is 8806")
    assert "8806" not in str(err.value) and str(err.value).endswith("(keys: notes, 1 other key)")
    fake.queue_reply(json.dumps({"facts": [{"pin_8806": "x", "category": "identity"}], "summary": "s"}))
    with capture_logs() as logs:
        await llm.extract("alice: my pin is 8806")
    [rejected] = [e for e in logs if e["event"] == "memory llm: facts rejected"]
    assert rejected["reasons"] == ["no content (keys category, 1 other key)"] and "8806" not in json.dumps(logs)


async def test_a_retry_is_logged_by_its_reason_and_status_not_the_providers_words(fake: FakeOpenAI) -> None:
    fake.queue_error(503, body="overloaded while reading: my pin is 8806")
    fake.queue_reply(json.dumps({"facts": [], "summary": "s"}))
    async with MemoryLLM(base_url=fake.url, model="m", api_key="sk-test-000000", retries=1, retry_delay=0) as mem:
        with capture_logs() as logs:
            await mem.extract("alice: my pin is 8806")
    [retry] = [e for e in logs if e["event"] == "memory llm: retrying"]
    assert retry["reason"] == "HTTP 503" and retry["status"] == 503 and retry["error"] == "memory.llm.LLMUnavailable"
    assert "8806" not in json.dumps(logs)


async def test_a_transport_failure_says_its_kind_and_errno_not_its_text() -> None:
    # Nothing listens on port 1: refused by the kernel (ECONNREFUSED).
    async with MemoryLLM(base_url="http://127.0.0.1:1/v1", model="m", api_key="sk-test-000000", retries=1,
                         retry_delay=0) as mem:
        with capture_logs() as logs, pytest.raises(LLMUnavailable) as err:
            await mem.extract("alice: hi")
    assert str(err.value) == "transport: ConnectError (ECONNREFUSED)"
    [retry] = [e for e in logs if e["event"] == "memory llm: retrying"]
    assert retry["errno_name"] == "ECONNREFUSED" and retry["caused_by"][0] == "httpx.ConnectError"


async def test_extract_prompt_says_an_update_keeps_what_still_holds(fake: FakeOpenAI, llm: MemoryLLM) -> None:
    """"用户叫王伟，在杭州做后端" updated by a job change came back as only the
    new job: the name was marked no longer true and left Core Memory. The
    model is told to say again what of the replaced memory still holds."""
    fake.queue_reply(reply([]))
    await llm.extract("[t] user: 我上个月换了工作，现在在上海", [Candidate(1, "用户叫王伟，在杭州做后端开发", "identity", 1.0)])
    system = fake.requests[-1]["messages"][0]["content"]
    assert "still holds" in system and "name" in system.split("still holds", 1)[1][:80]
