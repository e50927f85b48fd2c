"""scripts/bench_recall.py: metric functions, data normalisation, and a smoke run."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path

import pytest

from tests.scripts._load import load_script

REPO_ROOT = Path(__file__).resolve().parents[2]
SCRIPT = REPO_ROOT / "scripts" / "bench_recall.py"


br = load_script("bench_recall")
BENCH = br.default_data()  # the script's own default: a git worktree's smoke runs find the data too


# -- where the data is by default ------------------------------------------------


def _git(*args: str, cwd: Path) -> None:
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=cwd, check=True,
                   capture_output=True)


def test_the_default_data_is_next_to_a_plain_checkout(tmp_path: Path) -> None:
    (tmp_path / "shared" / "bench").mkdir(parents=True)
    (tmp_path / "repo").mkdir()
    assert br.default_data(tmp_path / "repo", {}) == tmp_path / "shared" / "bench"


def test_the_default_data_of_a_git_worktree_is_its_main_checkouts(tmp_path: Path) -> None:
    """A worktree at /work/wt/X has no ../shared/bench of its own: the main
    checkout's (the git common dir's parent's) is taken."""
    (tmp_path / "shared" / "bench").mkdir(parents=True)
    main = tmp_path / "main"
    main.mkdir()
    _git("init", "-q", cwd=main)
    _git("commit", "-q", "--allow-empty", "-m", "start", cwd=main)
    _git("worktree", "add", "-q", "-b", "x", str(tmp_path / "wt" / "x"), cwd=main)
    assert br.default_data(tmp_path / "wt" / "x", {}) == tmp_path / "shared" / "bench"


def test_the_environment_names_the_data_before_any_default(tmp_path: Path) -> None:
    (tmp_path / "shared" / "bench").mkdir(parents=True)
    (tmp_path / "repo").mkdir()
    mine = tmp_path / "mine"
    assert br.default_data(tmp_path / "repo", {"MYCLAW_BENCH_DATA": str(mine)}) == mine


def test_without_data_anywhere_the_default_is_the_plain_one(tmp_path: Path) -> None:
    """A clean clone (no git history either) keeps today's default, which
    the smoke runs skip on and --data's error names."""
    (tmp_path / "repo").mkdir()
    assert br.default_data(tmp_path / "repo", {}) == tmp_path / "shared" / "bench"


# -- metrics -------------------------------------------------------------------

RANKED = [{"x"}, {"a"}, {"y"}, {"b", "c"}, {"a"}]


def test_recall_at_k_is_share_of_gold_found() -> None:
    gold = {"a", "b"}
    assert br.recall_at_k(RANKED, gold, 1) == 0.0
    assert br.recall_at_k(RANKED, gold, 2) == 0.5
    assert br.recall_at_k(RANKED, gold, 4) == 1.0
    assert br.recall_at_k([], gold, 10) == 0.0


def test_a_hit_citing_several_ids_counts_each_gold_once() -> None:
    assert br.recall_at_k([{"a", "b", "z"}], {"a", "b", "c"}, 1) == pytest.approx(2 / 3)
    assert br.recall_at_k([{"a"}, {"a"}], {"a", "b"}, 2) == 0.5


def test_all_at_k() -> None:
    assert br.all_at_k(RANKED, {"a", "b"}, 3) == 0.0
    assert br.all_at_k(RANKED, {"a", "b"}, 4) == 1.0


def test_reciprocal_rank_uses_first_gold_hit() -> None:
    assert br.reciprocal_rank(RANKED, {"a", "b"}) == 0.5
    assert br.reciprocal_rank(RANKED, {"c"}) == 0.25
    assert br.reciprocal_rank(RANKED, {"nope"}) == 0.0


def test_ndcg_binary_gains() -> None:
    assert br.ndcg_at_k([{"a"}, {"b"}], {"a", "b"}, 10) == pytest.approx(1.0)
    # one gold at rank 2 of a single-gold query: 1/log2(3)
    assert br.ndcg_at_k([{"x"}, {"a"}], {"a"}, 10) == pytest.approx(1 / math.log2(3))
    # gold at ranks 2 and 4 out of two: (1/log2 3 + 1/log2 5) / (1 + 1/log2 3)
    want = (1 / math.log2(3) + 1 / math.log2(5)) / (1 + 1 / math.log2(3))
    assert br.ndcg_at_k(RANKED, {"a", "b"}, 10) == pytest.approx(want)
    # a repeat of an already-credited id gains nothing, so nDCG stays <= 1
    assert br.ndcg_at_k([{"a"}, {"a"}, {"a"}], {"a"}, 10) == pytest.approx(1.0)
    assert br.ndcg_at_k(RANKED, {"a"}, 1) == 0.0


def test_metrics_reject_empty_gold() -> None:
    with pytest.raises(ValueError):
        br.recall_at_k(RANKED, set(), 5)


def test_aggregate_and_percentile() -> None:
    agg = br.aggregate([br.score_query([{"a"}], {"a"}), br.score_query([{"x"}], {"a"})])
    assert agg == {"R@1": 0.5, "R@5": 0.5, "R@10": 0.5, "All@10": 0.5, "MRR": 0.5, "nDCG@10": 0.5, "n": 2}
    assert br.aggregate([])["n"] == 0
    assert br.percentile([1.0, 2.0, 3.0, 4.0, 5.0], 50) == 3.0
    assert br.percentile([0.0, 10.0], 95) == pytest.approx(9.5)


# -- data normalisation --------------------------------------------------------

KNOWN = {"D1:3", "D8:6", "D9:17", "D11:26", "D30:5", "D2:1"}


@pytest.mark.parametrize(
    ("raw", "want", "fix"),
    [
        (["D1:3"], ["D1:3"], None),
        (["D:11:26"], ["D11:26"], "reformatted"),
        (["D30:05"], ["D30:5"], "reformatted"),
        (["D8:6; D9:17"], ["D8:6", "D9:17"], "split"),
        (["D8:6 D9:17"], ["D8:6", "D9:17"], "split"),
        ("D8:6, D9:17", ["D8:6", "D9:17"], "split"),
        (["D"], [], "unparseable"),
        (["D77:1", "D2:1"], ["D2:1"], "dangling"),
        (["D1:3", "D1:3"], ["D1:3"], None),
    ],
)
def test_normalise_evidence(raw: object, want: list[str], fix: str | None) -> None:
    fixes: Counter[str] = Counter()
    assert br.normalise_evidence(raw, KNOWN, fixes) == want
    if fix is None:
        assert not fixes
    else:
        assert fixes[fix] >= 1


def test_locomo_date_and_turn_content() -> None:
    assert br.parse_locomo_date("1:56 pm on 8 May, 2023") == datetime(2023, 5, 8, 13, 56, tzinfo=UTC)
    assert br.turn_content({"speaker": "Mel", "text": "Look!", "blip_caption": "a photo of a lake"}) == (
        "Mel: Look! [image: a photo of a lake]"
    )
    assert br.turn_content({"speaker": "Mel", "text": "Hi"}) == "Mel: Hi"


def test_an_observation_carries_the_turns_it_cites_as_source_text() -> None:
    conv = {
        "sample_id": "c1",
        "conversation": {
            "session_1_date_time": "1:56 pm on 8 May, 2023",
            "session_1": [
                {"speaker": "Mel", "dia_id": "D1:1", "text": "I do kickboxing now"},
                {"speaker": "Jo", "dia_id": "D1:2", "text": "Cool", "blip_caption": "a gym"},
            ],
        },
        "observation": {"session_1_observation": {"Mel": [["Mel took up a combat sport", ["D1:1", "D1:2"]]]}},
        "qa": [],
    }
    _, obs = br.locomo_corpora(conv, Counter())
    [(memory, _)] = obs.memories
    assert memory.content == "Mel took up a combat sport"
    assert memory.source_text == "Mel: I do kickboxing now\nJo: Cool [image: a gym]"


def test_with_context_gives_each_query_the_ones_before_it() -> None:
    now = datetime(2023, 5, 8, tzinfo=UTC)
    corpus = br.Corpus("c", queries=[br.Query(f"q{i}", "u", f"text {i}", frozenset({"D1:1"}), now) for i in range(4)])
    br.with_context(corpus, 2)
    assert [q.context for q in corpus.queries] == [(), ("text 0",), ("text 0", "text 1"), ("text 1", "text 2")]
    assert [q.text for q in corpus.queries] == ["text 0", "text 1", "text 2", "text 3"]


def test_madial_query_is_latest_user_line_before_first_test_turn() -> None:
    dialogue = [
        "<BOD>\n",
        '<Bart>:"我昨天看了武侠小说"\n',
        '<Assistant>:"有趣！"\n',
        '<Bart>: "我想学剑术！"\n',
        '<Assistant>:"记得上次你读《射雕英雄传》"\n',
        '<Assistant>:"alternative line"\n',
        '"untagged reply"\n',
        "<EOD>\n",
    ]
    got = br.madial_query(dialogue, [5, 4])
    assert got == ("我想学剑术！", ("我昨天看了武侠小说",))  # the user's own lines, as the gateway passes
    long = ["<BOD>\n"] + [f'<Bart>:"u{i}"\n' if i % 2 == 0 else f'<Assistant>:"a{i}"\n' for i in range(12)] + ["<EOD>\n"]
    assert br.madial_query(long, [12]) == ("u10", ("u2", "u4", "u6", "u8"))
    assert br.madial_query(dialogue, []) is None
    assert br.madial_query(["<BOD>\n", '<Assistant>:"hi"\n'], [1]) is None


# -- smoke run on data derived at test time -----------------------------------------


def _derive_small_split(dest: Path) -> None:
    """One LoCoMo conversation cut to its first three sessions, and a few
    MADial dialogues of each language with their memory archives."""
    convs = json.loads((BENCH / "locomo" / "locomo-public.json").read_text(encoding="utf-8"))
    conv = min(convs, key=lambda c: sum(len(v) for k, v in c["conversation"].items() if isinstance(v, list)))
    keep = {f"session_{n}" for n in (1, 2, 3)}
    conv["conversation"] = {
        k: v
        for k, v in conv["conversation"].items()
        if k.startswith("speaker") or k in keep or k.removesuffix("_date_time") in keep
    }
    conv["observation"] = {k: v for k, v in conv["observation"].items() if k.removesuffix("_observation") in keep}
    (dest / "locomo").mkdir(parents=True)
    (dest / "locomo" / "one.json").write_text(json.dumps(conv), encoding="utf-8")
    (dest / "madial").mkdir()
    for lang in ("zh", "en"):
        for name in (f"madial-{lang}-memory.jsonl",):
            (dest / "madial" / name).write_text((BENCH / "madial" / name).read_text(encoding="utf-8"), encoding="utf-8")
        lines = (BENCH / "madial" / f"madial-{lang}-dialogue-public.jsonl").read_text(encoding="utf-8").splitlines()
        (dest / "madial" / f"madial-{lang}-dialogue-smoke.jsonl").write_text("\n".join(lines[:6]) + "\n", encoding="utf-8")


def _in_unit(v: object) -> bool:
    return isinstance(v, int | float) and 0.0 <= v <= 1.0


@pytest.mark.skipif(not (BENCH / "locomo").is_dir(), reason=f"benchmark data not found at {BENCH}; smoke run skipped")
def test_smoke_run_on_one_small_conversation(tmp_path: Path) -> None:
    data = tmp_path / "bench"
    _derive_small_split(data)
    out = tmp_path / "out.json"
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), "--data", str(data), "--json", str(out)],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert "locomo_turns" in proc.stdout and "latency" in proc.stdout
    report = json.loads(out.read_text(encoding="utf-8"))
    assert set(report) == {"locomo_turns", "locomo_observations", "madial_zh", "madial_en", "latency_ms"}
    for key in ("locomo_turns", "locomo_observations", "madial_zh", "madial_en"):
        head = report[key]["headline"]
        assert set(head) == {"R@1", "R@5", "R@10", "All@10", "MRR", "nDCG@10", "n"}
        assert head["n"] > 0
        assert all(_in_unit(head[m]) for m in br.METRICS), head
        assert head["R@1"] <= head["R@5"] <= head["R@10"]
        assert _in_unit(report[key]["prefilter_pass"])
    for key in ("locomo_turns", "locomo_observations"):
        cats = report[key]["by_category"]
        assert cats and set(cats) <= {"1", "2", "3", "4", "5"}
        assert sum(c["n"] for k, c in cats.items() if k != "5") == report[key]["headline"]["n"]
    # cut to three sessions, questions about later sessions lose their evidence
    assert report["locomo_turns"]["evidence_fixes"].get("evidence_dangling", 0) > 0
    lat = report["latency_ms"]
    assert 0 < lat["p50"] <= lat["p95"]


# -- hybrid recall (--embed-url) against the fake embeddings endpoint ------------------

HEADLINE_SETS = ("locomo_turns", "locomo_observations", "madial_zh", "madial_en")


def _assert_headlines(report: dict[str, object]) -> None:
    for key in HEADLINE_SETS:
        head = report[key]["headline"]  # type: ignore[index]
        assert head["n"] > 0
        assert all(_in_unit(head[m]) for m in br.METRICS), (key, head)
        assert head["R@1"] <= head["R@5"] <= head["R@10"]


@pytest.mark.skipif(not (BENCH / "locomo").is_dir(), reason=f"benchmark data not found at {BENCH}; smoke run skipped")
async def test_hybrid_run_reports_its_settings_and_never_falls_back(tmp_path: Path) -> None:
    from tests.fakes.openai_server import FakeOpenAI

    data = tmp_path / "bench"
    _derive_small_split(data)
    async with FakeOpenAI() as fake:
        report = await br.run_benchmark(
            data, embed_url=fake.url, embed_model="fake-embed", fusion="rrf", lexical_share=0.6, min_similarity=0.1
        )
        assert fake.embedding_requests, "the memories and queries went through the endpoint"
    assert report["hybrid"] == {
        "model": "fake-embed",
        "fusion": "rrf",
        "lexical_share": 0.6,
        "min_similarity": 0.1,
        "fallbacks": 0,
    }
    _assert_headlines(report)
    assert not any("WARNING" in n for n in report.get("_notes", []))
    table = br.format_table(report)
    assert "hybrid recall on: model fake-embed, fusion rrf, lexical_share 0.6, min_similarity 0.1, fallbacks 0" in table
    assert "embedding call" in table

    lexical = await br.run_benchmark(data)
    assert "hybrid" not in lexical
    _assert_headlines(lexical)
    assert "hybrid" not in br.format_table(lexical)


@pytest.mark.skipif(not (BENCH / "locomo").is_dir(), reason=f"benchmark data not found at {BENCH}; smoke run skipped")
async def test_hybrid_fallbacks_are_counted_and_warned_about(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from tests.fakes.openai_server import FakeOpenAI

    data = tmp_path / "bench"
    _derive_small_split(data)
    async with FakeOpenAI() as fake:
        # the memories embed fine; then the endpoint fails once, on a query
        real = br.Vectorizer.drain

        async def drain_then_fail(self: object) -> int:
            n = await real(self)  # type: ignore[arg-type]
            fake.queue_embedding_error(500)
            return n

        monkeypatch.setattr(br.Vectorizer, "drain", drain_then_fail)
        report = await br.run_benchmark(data, only=["madial_en"], embed_url=fake.url)
    assert report["hybrid"]["fallbacks"] == 1
    assert report["hybrid"]["model"] == "local" and report["hybrid"]["fusion"] == "weighted"
    assert any("WARNING: 1 hybrid" in n for n in report["_notes"])


def test_hybrid_flags_are_checked(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for bad in (["--lexical-share", "1.5"], ["--fusion", "max"]):
        with pytest.raises(SystemExit):
            br.main(["--data", str(tmp_path), "--embed-url", "http://127.0.0.1:9/v1", *bad])
    assert "--lexical-share must be in [0, 1]" in capsys.readouterr().err
