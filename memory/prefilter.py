"""``should_retrieve``: pure rules deciding whether a message may need memory.

Seed 000 section 5.2. No LLM, no I/O; one pass of precompiled regexes, well
under 50 microseconds a call (scripts/bench_latency.py measures it).

Order of decisions:
1. empty / trivial acknowledgements ("好的", "ok", "继续") -> no
2. the message is mostly a code block -> no
3. a trigger (memory words, time references, personal pronouns, questions,
   preference / config words, a known project name) -> yes
4. a bare instruction ("帮我写个函数", "translate this") -> no
5. otherwise: longer messages yes (they usually carry a topic worth
   looking up), short ones no.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

__all__ = ["should_retrieve"]

_SKIP_EXACT = frozenset(
    """继续 好的 好 好滴 确认 收到 嗯 嗯嗯 哦 对 是的 行 可以 谢谢 多谢 感谢 没问题 明白 了解 知道了 ok okay
    k yes no yep nope sure thanks thank you thx ty cool nice great got it continue go on next done 👍 🙏 ❤️
    hi hello hey 你好 在吗 哈哈 哈哈哈 lol""".split()
) | {"thank you", "go on", "got it", "sounds good", "好的谢谢", "ok thanks"}

_TRIM = re.compile(r"^[\s\W_]+|[\s\W_]+$", re.UNICODE)

_TRIGGER = re.compile(
    "|".join(
        [
            # memory words
            r"记得|记不记得|还记得|忘了|想起|回忆|说过|提过|讲过|聊过|告诉过|记住|备忘",
            r"\bremember\b|\brecall\b|\bforg[eo]t|\bmentioned\b|\btold you\b|\bwe discussed\b|\bsaid\b",
            # time references
            r"上次|之前|以前|先前|昨天|前天|上周|上个?月|去年|那天|那次|最近|刚才|早些时候",
            r"\blast (time|week|month|year|night)\b|\byesterday\b|\bbefore\b|\bearlier\b|\bago\b|\bprevious(ly)?\b",
            # personal / possessive
            r"我的|我们的|我家|我在|我是|我叫|我住|我用|你知道我",
            r"\bmy\b|\bmine\b|\bour\b|\bwe\b|\bi'?m\b|\bi am\b|\bi (use|have|had|live|work|like|prefer|told)\b",
            # questions
            r"什么|怎么|为什么|为啥|哪个|哪里|哪儿|哪些|多少|几[个点号天次]|是否|吗[\s?？!！。]*$|呢[\s?？!！。]*$",
            r"[?？]",
            r"^(what|when|where|which|who|whom|whose|why|how|is|are|was|were|do|does|did|can|could|should|have|has)\b",
            # preferences / configuration / secrets
            r"喜欢|偏好|习惯|爱好|讨厌|设置|配置|密码|账号|密钥|地址|生日|电话|邮箱|版本|部署|项目|决定|方案",
            r"\bprefer|\bfavou?rite\b|\blike\b|\bsettings?\b|\bconfig|\bpassword\b|\baccount\b|\baddress\b|"
            r"\bbirthday\b|\bphone\b|\bemail\b|\bversion\b|\bdeploy|\bproject\b|\bdecid|\bplan\b",
        ]
    ),
    re.IGNORECASE,
)

_INSTRUCTION = re.compile(
    r"^(请|帮我|帮忙|麻烦|给我)?\s*(写|翻译|生成|改写|润色|总结|解释|优化|格式化|转换)"
    r"|^(please\s+)?(write|translate|generate|rewrite|summari[sz]e|explain|format|convert|refactor)\b",
    re.IGNORECASE,
)

_FENCE = re.compile(r"```.*?(```|$)", re.DOTALL)
_CODE_LINE = re.compile(r"^\s*(def |class |import |from \S+ import|func |package |#include|public |private |"
                        r"const |let |var |return\b|if \(|for \(|\}|\{|//|/\*|<\w+[ >])", re.MULTILINE)


def _mainly_code(msg: str) -> bool:
    fenced = sum(len(m.group(0)) for m in _FENCE.finditer(msg)) if "```" in msg else 0
    if fenced and fenced >= 0.6 * len(msg):
        return True
    lines = [ln for ln in msg.splitlines() if ln.strip()]
    if len(lines) >= 3:
        code = len(_CODE_LINE.findall(msg))
        return code >= 0.6 * len(lines)
    return False


def _has_project(low: str, projects: Iterable[str]) -> bool:
    for p in projects:
        if len(p) >= 2 and p.lower() in low:
            return True
    return False


def should_retrieve(msg: str, known_projects: Iterable[str] = ()) -> bool:
    text = msg.strip()
    if not text:
        return False
    low = text.lower()
    core = _TRIM.sub("", low)
    if not core or core in _SKIP_EXACT or low in _SKIP_EXACT:
        return False
    if _mainly_code(text):
        return False
    if _TRIGGER.search(low) or _has_project(low, known_projects):
        return True
    if _INSTRUCTION.search(core):
        return False
    # No trigger word: a substantial statement still names a topic worth
    # looking up; a few characters of chatter does not.
    wide = sum(1 for ch in core if ord(ch) > 0x2E7F)
    return wide >= 12 or len(core.split()) >= 8
