from __future__ import annotations


import pytest

from memory.prefilter import should_retrieve

RETRIEVE = [
    # memory words / time references (zh)
    "我之前说过我的服务器密码是什么吗？",
    "你还记得我女儿的生日吗",
    "上次我们聊的那个方案后来怎么样了",
    "昨天说的部署问题解决了吗",
    "我喜欢喝什么咖啡来着",
    "我的邮箱是多少",
    "帮我回忆一下上周的会议内容",
    "我们之前决定用哪个数据库",
    # colloquial and vague time words (memory/timeref.py reads them too)
    "昨儿跟你说的那家店",
    "半个月前提到的书",
    "上星期五的会",
    "上礼拜聊的那个",
    "前两天说的事",
    "那个项目的配置放在哪里",
    "我住在哪个城市",
    # memory words / time references (en)
    "do you remember which editor I use?",
    "what's my wife's birthday again",
    "Remind me what we decided about the cache TTL",
    "What did I tell you about my allergies?",
    "last time we talked about the deployment, what was the plan?",
    "which package manager do I prefer",
    "I mentioned a book yesterday, what was it",
    "where did we put the staging config",
    # known project named
    "webshop 的数据库迁移做完了",
    "status of myclaw rollout",
]

SKIP = [
    "好的",
    "好的！",
    "继续",
    "确认",
    "嗯嗯",
    "收到，谢谢",
    "ok",
    "OK!",
    "yes",
    "no",
    "thanks!",
    "thank you",
    "lol",
    "👍",
    "",
    "   ",
    # bare instructions
    "帮我写个函数",
    "帮我写个函数，把列表去重",
    "翻译这段话",
    "帮忙润色一下这段文字：今天的会议很成功",
    "translate this paragraph into English please",
    "write a haiku about autumn",
    "please summarize the text below",
    # code
    "```python\nprint('hi')\nfor i in range(3):\n    pass\n```",
    "def add(a, b):\n    return a + b\n\nclass Foo:\n    pass\n",
    "```\nSELECT * FROM users WHERE id = 1;\n```",
]


@pytest.mark.parametrize("msg", RETRIEVE)
def test_triggers(msg: str) -> None:
    assert should_retrieve(msg, ["myclaw", "webshop"]) is True


@pytest.mark.parametrize("msg", SKIP)
def test_skips(msg: str) -> None:
    assert should_retrieve(msg, ["myclaw", "webshop"]) is False


def test_known_project_alone_triggers() -> None:
    assert should_retrieve("bump foobar deps", ["foobar"]) is True
    assert should_retrieve("bump foobar deps", []) is False


def test_question_about_code_in_block_still_triggers_when_personal() -> None:
    msg = "上次我的这段代码报错了，你还记得吗？\n```\nx = 1\n```"
    assert should_retrieve(msg) is True
