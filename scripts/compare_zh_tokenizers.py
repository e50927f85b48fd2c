"""Chinese tokenisation for the memory index: bigrams vs jieba, measured.

Scores each tokeniser with the same plain BM25 (k1=1.2, b=0.75, per-user
collection) on

* MADial-Bench zh (public half): a user's memory archive is the collection,
  the query is the user's turns of the dialogue before the test turn;
  metric R@5 / MRR over ``relevant-id``;
* hand-written cases: two-character words inside sentences, longer phrases,
  mixed Chinese/English, single-character queries (the right memory must be
  first).

It also reports the cost: jieba's dictionary load time and resident memory,
and tokenisation time per memory.

    python scripts/compare_zh_tokenizers.py [--data ../shared/bench]

The data is read by path and never copied. Results are written up in
docs/RETRIEVAL.md.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import resource
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

_HAN = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff]+|[a-z0-9]+")


def bigrams(text: str) -> list[str]:
    out: list[str] = []
    for run in _HAN.findall(text.lower()):
        if run.isascii() or len(run) == 1:
            out.append(run)
        else:
            out.extend(run[i : i + 2] for i in range(len(run) - 1))
    return out


def uni_bigrams(text: str) -> list[str]:
    out: list[str] = []
    for run in _HAN.findall(text.lower()):
        if run.isascii():
            out.append(run)
        else:
            out.extend(run)
            out.extend(run[i : i + 2] for i in range(len(run) - 1))
    return out


def make_jieba(search: bool) -> Callable[[str], list[str]]:
    try:
        import jieba
    except ImportError:
        raise SystemExit("jieba is not installed: .venv/bin/pip install -e '.[bench]'") from None

    jieba.setLogLevel(60)
    cut = jieba.lcut_for_search if search else jieba.lcut

    def tok(text: str) -> list[str]:
        out: list[str] = []
        for run in _HAN.findall(text.lower()):
            if run.isascii():
                out.append(run)
            else:
                out.extend(w for w in cut(run) if w.strip())
        return out

    return tok


def bm25_rank(docs: dict[str, list[str]], query: list[str]) -> list[str]:
    n = len(docs)
    avg = sum(len(d) for d in docs.values()) / max(1, n)
    df: Counter[str] = Counter()
    for d in docs.values():
        df.update(set(d))
    q = Counter(query)
    scores: dict[str, float] = {}
    for did, d in docs.items():
        tf = Counter(d)
        s = 0.0
        for t, qn in q.items():
            f = tf.get(t, 0)
            if not f:
                continue
            idf = math.log(1 + (n - df[t] + 0.5) / (df[t] + 0.5))
            s += qn * idf * f * 2.2 / (f + 1.2 * (0.25 + 0.75 * len(d) / avg))
        scores[did] = s
    return sorted(scores, key=lambda k: (-scores[k], k))


def madial(data: Path, tok: Callable[[str], list[str]]) -> tuple[float, float, int]:
    mems: dict[int, dict[str, str]] = {}
    for line in (data / "madial" / "madial-zh-memory.jsonl").read_text("utf-8").splitlines():
        for mid, m in json.loads(line).items():
            mems.setdefault(int(m["user-id"]), {})[mid] = m["event"]
    r5 = mrr = 0.0
    n = 0
    for line in (data / "madial" / "madial-zh-dialogue-public.jsonl").read_text("utf-8").splitlines():
        d = json.loads(line)
        docs = {k: tok(v) for k, v in mems[int(d["user-id"])].items()}
        gold = {str(g) for g in d["relevant-id"]}
        for turn in d["test-turn"]:
            user_turns = [t for t in d["dialogue"][1:turn] if not t.startswith("<Assistant>")]
            query = tok(" ".join(t.split(":", 1)[-1] for t in user_turns))
            ranked = bm25_rank(docs, query)
            first = next((i for i, k in enumerate(ranked) if k in gold), None)
            r5 += bool(gold & set(ranked[:5])) / 1
            mrr += 1 / (first + 1) if first is not None else 0
            n += 1
    return r5 / n, mrr / n, n


# (memories, query, index of the memory that must rank first)
CASES: list[tuple[list[str], str, int]] = [
    (["我的部署密码是 hunter2", "部署脚本在 ops 仓库里", "我喜欢喝咖啡"], "密码是什么", 0),
    (["周五下午部署到生产环境", "数据库密码改过了", "早上喝了一杯咖啡"], "什么时候部署", 0),
    (["他每天早上都喝咖啡", "咖啡机坏了要修", "晚上喝茶"], "我喜欢喝什么咖啡", 0),
    (["项目 myclaw 用 Python 写", "myclaw 的部署在阿里云", "我在学 Go"], "myclaw 部署在哪里", 1),
    (["服务器用的是 Ubuntu 22.04", "笔记本装了 macOS", "用 pnpm 管理前端依赖"], "前端依赖用什么管理", 2),
    (["女儿的生日是三月五号", "儿子喜欢踢足球", "妻子是医生"], "生日", 0),
    (["我住在杭州西湖区", "公司在上海浦东", "老家是湖南长沙"], "我家在哪个城市", 0),
    (["我对花生过敏", "我喜欢吃花生酱", "我讨厌香菜"], "过敏", 0),
    (["用 Redis 做缓存", "缓存失效时间设为十分钟", "日志保存三十天"], "缓存过期时间", 1),
    (["猫的名字叫咪咪", "狗叫旺财", "养了一条金鱼"], "猫", 0),
    (["北京烤鸭很好吃", "烤肉店在公司楼下", "鸭血粉丝汤"], "烤鸭", 0),
    (["我习惯用 vim 写代码", "同事都用 VS Code", "代码风格用 black"], "编辑器习惯", 0),
    (["机器学习课程下周开始", "学习英语每天半小时", "机器人比赛获奖"], "机器学习", 0),
    (["中华人民共和国成立于1949年", "人民公园在市中心", "共和党赢了选举"], "人民共和国", 0),
]


def cases(tok: Callable[[str], list[str]]) -> tuple[int, int]:
    ok = 0
    for docs, q, want in CASES:
        ranked = bm25_rank({str(i): tok(d) for i, d in enumerate(docs)}, tok(q))
        ok += ranked[0] == str(want)
    return ok, len(CASES)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", default=str(Path(__file__).resolve().parents[2] / "shared" / "bench"))
    data = Path(ap.parse_args().data)
    rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    t0 = time.perf_counter()
    jb_search = make_jieba(search=True)
    jb_search("预热")  # jieba loads its dictionary lazily, on first cut
    load = time.perf_counter() - t0
    rss1 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(f"jieba dictionary load: {load * 1000:.0f} ms, +{(rss1 - rss0) / 1024:.0f} MB RSS")
    toks = {
        "bigram": bigrams,
        "unigram+bigram": uni_bigrams,
        "jieba cut": make_jieba(search=False),
        "jieba cut_for_search": jb_search,
    }
    sample = "我上周把 myclaw 部署到了阿里云的服务器上，数据库密码存在 vault 里，周五再检查一次。" * 2
    print(f"{'tokeniser':<22} {'MADial R@5':>10} {'MRR':>6} {'cases':>6} {'us/memory':>10}")
    for name, tok in toks.items():
        r5, mrr, n = madial(data, tok)
        ok, total = cases(tok)
        t = time.perf_counter()
        for _ in range(2000):
            tok(sample)
        us = (time.perf_counter() - t) / 2000 * 1e6
        print(f"{name:<22} {r5:>10.3f} {mrr:>6.3f} {ok:>3}/{total:<2} {us:>10.1f}")
    print(f"(MADial zh public queries: {n})")


if __name__ == "__main__":
    main()
