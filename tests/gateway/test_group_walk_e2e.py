"""Groups over weeks, end to end (real App, the Telegram, Feishu and
OpenAI fakes, the model's extractions scripted from what it is shown): a
family plans a trip in a Telegram group, a team moves a release date in a
Feishu group. The bot answers only when addressed; a member's group facts
come back to them; a changed decision is read as the current one; a
member's private reminder never reaches the group; a reminder made in the
group is posted there, with the turns marked by who said them, after
another member left. What a group reads is the asker's own facts and the
group's own notes (memory/groupnotes.py): another member's decision said
there weeks ago is read by everyone in that group, cited as the group's
note and by who said it; never in another group, never in a private chat."""

from __future__ import annotations

import asyncio
import json
from datetime import timedelta
from pathlib import Path
from typing import Any

from memory import ManualClock
from tests.fakes.feishu_server import FakeFeishu
from tests.fakes.openai_server import FakeOpenAI, Reply, said, split_user_content, text_of
from tests.fakes.telegram_server import FakeTelegram

from .handtick import by_hand
from .test_e2e_feishu import ENCRYPT_KEY, _app, _feishu_section, _until
from .test_quoted_e2e import _telegram
from .test_remembering_e2e import Model

FAMILY = -100900
FRIENDS = -100901  # another group Leo is in
TOM, ANNA, MIA, LEO = 11, 12, 13, 14
NAMES = {TOM: "Tom", ANNA: "Anna", MIA: "Mia", LEO: "Leo"}


def _fact(content: str, terms: list[str], category: str = "decision", updates: int | None = None) -> dict[str, Any]:
    return {"content": content, "project": "_global", "topic": "trip", "category": category,
            "importance": 0.8, "updates": updates, "terms": terms}


def _note(content: str, terms: list[str], said: str, category: str = "decision",
          replaces: str | None = None) -> dict[str, Any]:
    """A group's note, naming the line it came from by its words (and the
    note it replaces), as the scripted model numbers them."""
    return {**_fact(content, terms, category), "said": said,
            **({"replaces": replaces} if replaces is not None else {})}


class Scripted(Model):
    """Chat turns answered plainly (a reminder asked for: a one-time job);
    extraction calls answered with the facts the lines they show hold."""

    def chat(self, body: dict[str, Any]) -> Reply:
        if body["messages"][-1]["role"] == "tool":
            return Reply(content="Done: I will remind the group.")
        words = said(body)
        if "remind us the day before we leave" in words:
            return Reply(content=None, tool_calls=[{"name": "cron_add", "arguments": {
                "at": "2026-03-27 18:00", "message": "Remind the family: we leave for Lisbon tomorrow"}}])
        return Reply(content=f"ok ({len(body['messages'])})")


def _block(body: dict[str, Any]) -> str:
    return split_user_content(text_of(body["messages"][-1]["content"]))[0]


def _recalled(body: dict[str, Any]) -> str:
    """The <memories> block's lines the request shows as current."""
    return "\n".join(line for line in _block(body).splitlines() if line.startswith("- ["))


def _prompt(body: dict[str, Any]) -> str:
    return json.dumps(body["messages"], ensure_ascii=False)


async def test_a_family_plans_a_trip_in_a_group_over_three_weeks(tmp_path: Path, clock: ManualClock) -> None:
    model = Scripted()
    async with FakeOpenAI(api_key="sk-family-walk-0123456789", responder=model) as llm, FakeTelegram() as tg:
        app = _app(tmp_path, clock, llm, {"telegram": _telegram(tg)}, gateway={"timezone": "UTC"})
        try:
            await app.open()
            await asyncio.wait_for(app.start(), 15)
            await by_hand(app)  # learn() ticks: the loop's own tick took its users first under load
            assert app.loop is not None and app.extraction is not None and app.cron is not None
            sent = 0

            async def say(user: int, text: str, *, group: bool = True, mention: bool = True,
                          reply: bool = False, chat: int = FAMILY) -> dict[str, Any]:
                nonlocal sent
                asked = len(llm.chat_requests())  # a due extraction may ask meanwhile: not an answer
                tg.push_text(chat if group else user, user, text, chat_type="supergroup" if group else "private",
                             first_name=NAMES[user], mention=group and mention, reply_to_bot=reply)
                if group and not mention and not reply:
                    await asyncio.sleep(0.3)
                    assert app.loop is not None and await app.loop.drain(5)
                    assert len(tg.sent) == sent and len(llm.chat_requests()) == asked  # not addressed: no answer
                    return {}
                sent += 1
                await tg.wait_sent(sent, timeout=10)
                assert app.loop is not None and await app.loop.drain(5)
                return llm.last_chat()

            async def learn(*found: tuple[str, dict[str, Any]], notes: tuple[tuple[str, dict[str, Any]], ...] = ()) -> None:
                model.extractions.extend(found)
                model.notes.extend(notes)
                clock.advance(300)
                assert app.extraction is not None
                reports = await app.extraction.tick()  # type: ignore[attr-defined]
                assert reports and all(r.ok for r in reports)
                assert model.extractions == [] and model.notes == [], (model.extractions, model.notes)

            # Week 1: dates proposed, the hotel taken, Mia's allergy said in the group.
            await say(TOM, "let's go to Lisbon from March 20 to March 27")
            await say(ANNA, "I'll book the hotel in Alfama")
            await say(MIA, "remember I'm allergic to peanuts when you suggest restaurants")
            await say(LEO, "lol Mia and her peanuts", mention=False)  # the bot stays out
            await say(LEO, "sorry Mia. any beaches near Lisbon?", mention=False, reply=True)  # a reply to it: answered
            # Anna's private reminder, in her own chat.
            await say(ANNA, "remind me privately: my passport expires in April, renew it", group=False)
            await learn(
                ("from March 20 to March 27", {"facts": [_fact("Tom proposed the Lisbon trip for March 20 to 27", ["trip dates", "date", "when", "Lisbon", "旅行日期"])],
                                               "summary": "trip dates"}),
                ("book the hotel in Alfama", {"facts": [_fact("Anna is booking the hotel in Alfama", ["hotel", "booking", "accommodation", "酒店"])],
                                              "summary": "hotel"}),
                ("allergic to peanuts", {"facts": [_fact("Mia is allergic to peanuts", ["allergy", "peanuts", "food", "过敏"], "identity")],
                                         "summary": "allergy"}),
                ("passport expires", {"facts": [_fact("Anna's passport expires in April; renew it", ["passport", "renew", "护照"], "event")],
                                      "summary": "passport"}),
                # The group's own notes, from the same lines, each naming who said it.
                notes=(("book the hotel in Alfama", {"facts": [
                    _note("Tom proposed the Lisbon trip for March 20 to 27", ["trip dates", "date", "when", "Lisbon", "旅行日期"],
                          "from March 20 to March 27"),
                    _note("Anna is booking the hotel in Alfama", ["hotel", "booking", "accommodation", "酒店"],
                          "book the hotel in Alfama"),
                    _note("Mia is allergic to peanuts", ["allergy", "peanuts", "food", "过敏"], "allergic to peanuts", "identity"),
                ], "summary": "the family planned the Lisbon trip"}),),
            )

            # Week 2: the date changes.
            clock.advance(timedelta(days=7))
            await say(TOM, "change of plan: Lisbon is now March 28 to April 4, flights were cheaper")
            await learn(("now March 28 to April 4", {"facts": [_fact("The Lisbon trip is now March 28 to April 4"
                                                                     " (moved by Tom: cheaper flights)", ["trip dates", "date", "when", "Lisbon", "旅行日期"], updates=1)],
                                                     "summary": "dates moved"}),
                        notes=(("now March 28 to April 4", {"facts": [_note(
                            "The Lisbon trip is now March 28 to April 4 (moved by Tom: cheaper flights)",
                            ["trip dates", "date", "when", "Lisbon", "旅行日期"], "now March 28 to April 4",
                            replaces="March 20 to 27")], "summary": "dates moved"}),))
            # Small talk moves the early turns out of the group's window.
            for n in range(12):
                await say((TOM, ANNA, MIA, LEO)[n % 4], f"what should we pack, item {n}?")
            await learn()

            # Week 3: the questions.
            clock.advance(timedelta(days=7))
            asks: dict[str, dict[str, Any]] = {}
            asks["hotel"] = await say(LEO, "who is booking the hotel?")
            asks["date"] = await say(TOM, "what did we decide about the date?")
            asks["allergy"] = await say(LEO, "what is Mia allergic to?")
            asks["mia"] = await say(MIA, "what am I allergic to again?")
            asks["remind"] = await say(ANNA, "remind us the day before we leave")
            asks["private"] = await say(ANNA, "what did my family decide about the trip?", group=False)
            asks["leo-private"] = await say(LEO, "who is booking the hotel?", group=False)
            asks["friends"] = await say(LEO, "who is booking the hotel? is anyone allergic to something?", chat=FRIENDS)

            jobs = await app._cron_store.list()  # type: ignore[attr-defined]
            mine = [j for j in jobs if j.kind != "internal"]
            assert len(mine) == 1 and mine[0].chat_id == str(FAMILY)
            tg.push_left(FAMILY, MIA)  # nothing is sent for it; her leaving takes only her own jobs
            await asyncio.sleep(0.3)
            assert await app.loop.drain(5)
            clock.advance(timedelta(days=12, hours=6))  # 2026-03-27 18:15: the day before they leave
            await app.cron.run_due(clock.now())  # type: ignore[attr-defined]
            posted = await tg.wait_sent(sent + 1, timeout=10)
            assert await app.loop.drain(5)
        finally:
            await asyncio.wait_for(app.close(), 15)

    # The current date, and the replaced one (the group heard both) under it, marked.
    assert "March 28 to April 4" in _recalled(asks["date"]) and "March 20" not in _recalled(asks["date"])
    assert "no longer true: Tom proposed the Lisbon trip for March 20 to 27" in _block(asks["date"])
    # Each member's group facts come back to them, by name.
    assert "Mia is allergic to peanuts" in _recalled(asks["mia"])
    # The turns that said them left the group's window weeks ago: Leo reads
    # Anna's hotel and Mia's allergy from the group's notes (memory/groupnotes.py),
    # first, cited as the group's and by who said them. The rules tell the model so.
    assert "Alfama" not in said(asks["hotel"]) and "peanuts" not in said(asks["allergy"])
    first = _recalled(asks["hotel"]).splitlines()[0]
    assert "Anna is booking the hotel in Alfama" in first and "the group's note, said by Anna" in first, first
    first = _recalled(asks["allergy"]).splitlines()[0]
    assert "Mia is allergic to peanuts" in first and "the group's note, said by Mia" in first, first
    assert "holds \"Leo\"'s own memories: they are about" in text_of(asks["hotel"]["messages"][0]["content"])
    assert "the group's notes" in text_of(asks["hotel"]["messages"][0]["content"])
    # The group's date is the current one, its first note shown replaced under it.
    assert "March 28 to April 4" in _recalled(asks["date"]).splitlines()[0]
    # Never in another group Leo is in, never in a private chat.
    assert "Alfama" not in _prompt(asks["friends"]) and "peanuts" not in _prompt(asks["friends"])
    assert "Alfama" not in _prompt(asks["leo-private"]) and "group's note" not in _prompt(asks["leo-private"])
    # Anna's private chat reads what she said in the group, not Tom's dates nor the group's notes.
    assert "Anna is booking the hotel in Alfama" in _recalled(asks["private"])
    # ... cited there by the group's title as the gateway last saw it.
    hotel = next(line for line in _recalled(asks["private"]).splitlines() if "Alfama" in line)
    assert f'told by you in the group chat "Group {FAMILY}" on Telegram' in hotel or \
        f'from the group chat "Group {FAMILY}" on Telegram' in hotel, hotel
    assert "April 4" not in _prompt(asks["private"]) and "group's note" not in _prompt(asks["private"])
    # Her private reminder never reaches a group's prompt, nor what memory learns from one.
    groups = [b for b in llm.requests if "# Group chat" in text_of(b["messages"][0]["content"])]
    assert len(groups) > 20 and all("passport" not in _prompt(b) for b in groups)
    assert all("passport" not in p for p in model.extraction_prompts if "GROUP chat" in p)
    # The reminder is posted to the group, after Mia left, as Anna's job, the turns marked.
    assert posted[-1].chat_id == FAMILY and posted[-1].text.startswith("ok")
    job = [b for b in llm.requests if "leave for Lisbon tomorrow" in said(b)][-1]
    assert 'a scheduled job made by "Anna"' in text_of(job["messages"][0]["content"])
    assert any('<said by="Leo">\nwhat is Mia allergic to?' in text_of(m["content"]) for m in job["messages"])


async def test_a_team_decides_a_release_in_a_feishu_group(tmp_path: Path, clock: ManualClock) -> None:
    people = {name: f"ou_{name.lower():0<31}" for name in ("Lin", "Chen", "Wang", "Zhao", "Sun")}
    model = Scripted()
    async with FakeOpenAI(api_key="sk-team-walk-0123456789", responder=model) as llm, FakeFeishu() as feishu:
        for name, oid in people.items():
            feishu.contacts[oid] = name
        app = _app(tmp_path, clock, llm, {"feishu": _feishu_section(feishu, "webhook")}, gateway={"timezone": "UTC"})
        try:
            await app.open()
            await asyncio.wait_for(app.start(), 15)
            await by_hand(app)  # learn() ticks: the loop's own tick took its users first under load
            assert app.http is not None and app.loop is not None and app.extraction is not None
            hook = app.http.url + "/feishu/events"
            out = 0

            async def say(name: str, text: str, mention: bool = True) -> dict[str, Any]:
                nonlocal out
                asked = len(llm.chat_requests())  # a due extraction may ask meanwhile: not an answer
                event = feishu.message_event(("@_user_1 " if mention else "") + text, chat_id="oc_release",
                                             chat_type="group", open_id=people[name],
                                             mentions=[feishu.mention()] if mention else [])
                assert (await feishu.push_event(hook, event, encrypt_key=ENCRYPT_KEY)).status_code == 200
                if not mention:
                    await asyncio.sleep(0.3)
                    assert app.loop is not None and await app.loop.drain(5)
                    assert len(feishu.sent) == out and len(llm.chat_requests()) == asked
                    return {}
                out += 1
                await _until(lambda: len(feishu.sent) == out)
                assert app.loop is not None and await app.loop.drain(5)
                return llm.last_chat()

            async def learn(*found: tuple[str, dict[str, Any]], notes: tuple[tuple[str, dict[str, Any]], ...] = ()) -> None:
                model.extractions.extend(found)
                model.notes.extend(notes)
                clock.advance(300)
                reports = await app.extraction.tick()  # type: ignore[union-attr]
                assert reports and all(r.ok for r in reports)
                assert model.extractions == [] and model.notes == [], (model.extractions, model.notes)

            await say("Lin", "we ship 2.0 on December 10; Chen owns the changelog, Wang owns QA")
            await say("Zhao", "I'll own the migration script")
            await say("Sun", "coffee anyone?", mention=False)
            await learn(
                ("ship 2.0 on December 10", {"facts": [
                    _fact("Release 2.0 ships on December 10 (decided by Lin)", ["release date", "ship", "发布日期"]),
                    _fact("Lin assigned owners: Chen the changelog, Wang QA", ["owner", "changelog", "QA", "负责人"]),
                ], "summary": "release planned"}),
                ("migration script", {"facts": [_fact("Zhao owns the migration script", ["owner", "migration"])],
                                      "summary": "owner"}),
                notes=(("ship 2.0 on December 10", {"facts": [
                    _note("Lin: release 2.0 ships on December 10", ["release date", "ship", "发布日期"], "ship 2.0 on December 10"),
                    _note("Lin assigned owners: Chen the changelog, Wang QA", ["owner", "own", "changelog", "QA", "负责人"],
                          "Chen owns the changelog"),
                    _note("Zhao owns the migration script", ["owner", "migration"], "own the migration script"),
                ], "summary": "the release planned"}),),
            )
            clock.advance(timedelta(days=5))
            await say("Lin", "scratch that: we ship 2.0 on December 17, not the 10th; QA needs a week")
            await learn(("December 17", {"facts": [_fact("Release 2.0 now ships on December 17, not December 10"
                                                          " (Lin: QA needs a week)", ["release date", "ship", "发布日期"],
                                                          updates=1)], "summary": "release moved"}),
                        notes=(("December 17", {"facts": [_note(
                            "Lin: release 2.0 now ships on December 17, not December 10 (QA needs a week)",
                            ["release date", "ship", "发布日期"], "December 17", replaces="December 10")],
                            "summary": "release moved"}),))
            for n in range(12):
                await say(("Lin", "Chen", "Wang", "Zhao")[n % 4], f"status check {n}")
            await learn()
            clock.advance(timedelta(days=3))
            asks = {
                "lin-date": await say("Lin", "when do we ship 2.0?"),
                "chen-date": await say("Chen", "when do we ship 2.0?"),
                "wang-own": await say("Wang", "what do I own for the release?"),
                "sun-owners": await say("Sun", "who owns the migration script?"),
            }
        finally:
            await asyncio.wait_for(app.close(), 30)
    assert "December 17" in _recalled(asks["lin-date"]) and "December 10 (decided" not in _recalled(asks["lin-date"])
    assert "no longer true: Release 2.0 ships on December 10 (decided by Lin)" in _block(asks["lin-date"])
    # Lin's decisions are the group's notes too: Chen, Wang and Sun read them
    # there once the turns left the window, the current date first, cited
    # by who said it; what each decision replaced shown as no longer true.
    first = _recalled(asks["chen-date"]).splitlines()[0]
    assert "December 17" in first and "the group's note, said by Lin" in first, first
    assert "no longer true: Lin: release 2.0 ships on December 10" in _block(asks["chen-date"])
    assert "Wang QA" in _recalled(asks["wang-own"])
    first = _recalled(asks["sun-owners"]).splitlines()[0]
    assert "Zhao owns the migration script" in first and "said by Zhao" in first, first
