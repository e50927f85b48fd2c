"""The memory page's words, in English and Chinese (zh-Hans, and zh-Hant
drawn from it by gateway/web/_hant.py).

One catalogue of ``key -> (English, Chinese)`` templates (``str.format``
fields, the same in both), read through :class:`Words`. The page's
language: the one the user chose with the switch (cookie ``myclaw_lang``),
else the first of English and Chinese in the browser's ``Accept-Language``
by weight (any ``zh`` tag is Chinese, as for the bot's replies: gateway/bus.py
``app_in_chinese``; Japanese is not; ``zh-TW``, ``zh-HK``, ``zh-MO`` and
``zh-Hant`` read Traditional characters), else English.

Counts read as a person says them: "1 memory" / "2 memories", "3 条记忆".
"""

from __future__ import annotations

from datetime import UTC, tzinfo
from typing import Literal

from memory.clock import parse_ts

from ._hant import to_hant

__all__ = ["CATALOGUE", "LANGS", "LANG_COOKIE", "LOG_WORDS_ZH", "Lang", "Words", "pick_lang"]

Lang = Literal["en", "zh", "zh-Hant"]
LANG_COOKIE = "myclaw_lang"
# Each language by its own name, as the page's switch offers it; and its <html lang>.
LANGS: dict[Lang, tuple[str, str]] = {"en": ("English", "en"), "zh": ("简体中文", "zh-Hans"), "zh-Hant": ("繁體中文", "zh-Hant")}
_HANT_REGIONS = ("tw", "hk", "mo")

CATALOGUE: dict[str, tuple[str, str]] = {
    # -- frame ------------------------------------------------------------------
    "brand": ("myclaw · memory", "myclaw · 记忆"),
    "title_suffix": ("myclaw memory", "myclaw 记忆"),
    "skip": ("Skip to the memories", "跳到记忆列表"),
    "sign_out": ("Sign out", "退出登录"),
    "users": ("Users", "用户"),
    "users_nav": ("users", "用户"),
    "groups": ("Groups", "群聊"),
    "groups_nav": ("groups", "群聊"),
    "groups_hint": ("Each group's own notes, shared by its members: not a person's.",
                    "每个群聊的笔记，由群成员共享，不属于任何用户。"),
    "note_1": ("{n} note", "{n} 条笔记"),
    "note_n": ("{n} notes", "{n} 条笔记"),
    "forget_group_q": ("Erase the memory of the group {group} for good?", "永久删除群聊 {group} 的记忆？"),
    "forget_group_text": ("Its own memory ({place}: {notes}, {rows} with its summaries and the messages waiting to "
                          "be learnt) is deleted from the database, as when the bot is removed from the group. "
                          "Its members' own memories stay.",
                          "这个群聊的记忆（{place}：{notes}，连同对话摘要和等待提取的消息共 {rows}）将从数据库中删除，"
                          "和机器人被移出群聊时一样。群成员各人的记忆保留。"),
    "forget_group": ("Erase this group's memory", "删除这个群聊的记忆"),
    "err_group_owner": ("{user} is a group's own memory, not a person: see it under Groups",
                        "{user} 是群聊的记忆，不是用户：请在“群聊”下查看"),
    "err_group_name": ("a group is named <channel>:<chat_id>, not {group}", "群聊应写作 <channel>:<chat_id>，而不是 {group}"),
    "err_group_note": ("no note m{id} of the group {group}", "群聊 {group} 没有笔记 m{id}"),
    "err_group_unknown": ("no memory is kept for the group {group}", "没有保存群聊 {group} 的记忆"),
    "user_counts": ("{active} active, {archived} archived, {superseded} superseded",
                    "{active} 条有效，{archived} 条已归档，{superseded} 条旧版本"),
    # -- sign-in ----------------------------------------------------------------
    "sign_in": ("Sign in", "登录"),
    "wrong_token": ("Wrong token.", "令牌不对。"),
    "needs_token": ("The memory page needs the admin token (<code>gateway.admin.token</code>).",
                    "记忆管理页需要管理员令牌（<code>gateway.admin.token</code>）。"),
    "admin_token": ("Admin token", "管理员令牌"),
    "times_in": ("Times are in {zone}.", "时间为 {zone} 时间。"),
    "too_many_title": ("Try again later", "请稍后再试"),
    "too_many": ("too many wrong tokens from this address; try again in {seconds} s",
                 "这个地址输错令牌的次数太多；请 {seconds} 秒后再试"),
    "kept_sign_in": ("Your session had ended, so nothing was saved. Sign in: what you typed comes back in its "
                     "form, to save.",
                     "登录已过期，什么也没有保存。重新登录后，你输入的内容会回到表单里，再保存一次。"),
    "kept_wait": ("Nothing was saved. What you typed is kept in this page: sign in once the wait is over "
                  "and it comes back in its form, to save.",
                  "什么也没有保存。你输入的内容保存在这个页面里：等待过后再登录，它会回到表单里，再保存一次。"),
    "kept_title": ("Signed in", "已登录"),
    "kept_after_sign_in": ("Nothing was saved yet: here is what you typed. Save it to finish.",
                           "还没有保存：这是你输入的内容，保存后就完成了。"),
    "login_elsewhere": ("This sign-in did not come from this page. Open the memory page and sign in there.",
                        "这次登录不是从本页面发出的。请打开记忆管理页，在那里登录。"),
    # -- messages ---------------------------------------------------------------
    "refused": ("Request refused", "请求被拒绝"),
    "form_expired": ("This form has expired or did not come from this page. Reload the page and try again.",
                     "这个表单已过期，或不是从本页面发出的。请刷新页面后再试。"),
    "form_expired_kept": ("This form had expired (signed out and in again since it was opened, or from another page).",
                          "这个表单已过期（打开后又重新登录过，或不是从本页面发出的）。"),
    "cannot": ("Cannot do that", "无法完成"),
    "back_to_page": ("Back to the memory page", "返回记忆管理页"),
    "no_memories_title": ("No memories yet", "还没有记忆"),
    "no_memories_text": ("Memories appear here once people talk to the bot, or add one by hand under a user "
                         "(for example _global, which every user sees).",
                         "有人和机器人聊天后，记忆就会出现在这里；也可以在某个用户下手动添加"
                         "（例如 _global，所有用户都能看到）。"),
    "choose_user": ("Choose a user", "选择用户"),
    "choose_user_text": ("Each person the bot talks to has their own memories; <b>_global</b> holds facts every "
                         "user sees. Pick one on the left to see, search and edit their memories.",
                         "机器人对每个人都有各自的记忆；<b>_global</b> 里的事实所有用户都能看到。"
                         "在左侧选一个用户，查看、搜索和编辑其记忆。"),
    # -- notices after an action ------------------------------------------------
    "done_undone_edit": ("Edit of m{id} undone.", "已撤销对 m{id} 的编辑。"),
    "done_undone_archive_all": ("{memories} restored.", "已恢复 {memories}。"),
    "done_added": ("Memory m{id} added.", "已添加记忆 m{id}。"),
    "done_exists": ("The same memory is already stored as m{id}; nothing added.",
                    "同样的记忆已存为 m{id}，未重复添加。"),
    "done_edited": ("Memory m{id} saved.", "记忆 m{id} 已保存。"),
    "done_edited_entries": ("Memory m{id} saved. The Core Memory entries built on its old words are superseded "
                            "(Superseded tab); the next weekly refresh writes the profile again.",
                            "记忆 m{id} 已保存。基于其旧内容的核心记忆条目已成为旧版本（见“旧版本”标签），"
                            "下一次每周更新会重写个人档案。"),
    "done_archived": ("Memory m{id} archived. It can be restored from the Archived tab.",
                      "记忆 m{id} 已归档，可在“已归档”标签中恢复。"),
    "done_restored": ("Memory m{id} restored.", "记忆 m{id} 已恢复。"),
    "done_erased": ("Memory m{id} erased for good.", "记忆 m{id} 已永久删除。"),
    "done_erased_cascade": ("Memory m{id} erased for good, with its older versions and the Core Memory entries "
                            "built on it.", "记忆 m{id} 已永久删除，连同其旧版本和基于它的核心记忆条目。"),
    "done_archived_all": ("{memories} archived.", "已归档 {memories}。"),
    "done_erased_all": ("{memories} erased for good.", "已永久删除 {memories}。"),
    "done_forgot_group": ("{rows} of the group's memory erased for good.", "已永久删除群聊记忆 {rows}。"),
    "done_group_note_edited": ("The group's note m{id} saved.", "群聊笔记 m{id} 已保存。"),
    "done_group_note_erased": ("The group's note m{id} erased for good.", "群聊笔记 m{id} 已永久删除。"),
    "done_retried_set_aside": ("{id} set-aside lines will be tried again at the next extraction run.",
                               "{id} 行暂存的消息将在下次提取时重试。"),
    "done_unshared": ("Memory m{id} is no longer shared with groups.", "记忆 m{id} 已取消共享，群聊不再读到它。"),
    "done_undone_unshare": ("Memory m{id} is shared again.", "记忆 m{id} 已重新共享。"),
    "undo": ("Undo", "撤销"),
    # -- a memory's card ------------------------------------------------------------
    "src_extraction": ("Auto-extracted", "自动提取"),
    "src_compression": ("Auto (compressed)", "自动（压缩）"),
    "src_manual": ("Added by hand", "手动添加"),
    "src_migration": ("Migrated from file", "从文件迁移"),
    "tier_1": ("profile (tier 1)", "个人档案（第 1 层）"),
    "tier_2": ("knowledge (tier 2)", "知识（第 2 层）"),
    "st_active": ("active", "有效"),
    "st_archived": ("archived", "已归档"),
    "st_superseded": ("superseded", "旧版本"),
    "importance": ("importance", "重要性"),
    "shared": ("shared: {owner}", "共享：{owner}"),
    "shared_hint": ("visible to every user", "所有用户可见"),
    # A member's fact they let groups read (/share): {groups} are "channel:chat id".
    "shared_all": ("Shared with all groups", "在所有群聊中共享"),
    "shared_group": ("Shared with group {groups}", "在群 {groups} 中共享"),
    "replaced_in": ("In {group} m{id} is used instead", "在“{group}”中改用 m{id}"),
    "replaced_in_hint": ("that group reads its own newer fact instead of this one", "该群中改用在群里说的更新的事实"),
    "shared_groups_hint": ("read in a group when this user asks there (/share)", "该用户在群聊中提问时可读到（/share）"),
    "unshare": ("Unshare", "取消共享"),
    "score": ("score {score}", "得分 {score}"),
    "score_hint": ("retrieval score", "检索得分"),
    "created": ("created {when}", "创建于 {when}"),
    "updated": ("updated {when}", "更新于 {when}"),
    "replaced": ("Replaced {items}", "取代了 {items}"),
    "superseded_by": ("Superseded by {link}", "已被 {link} 取代"),
    "chat": ("chat {id}", "会话 {id}"),
    "session": ("session {id}", "会话段 {id}"),
    "said": ("said {span}", "说于 {span}"),
    "built_on": ("built on {links}", "基于 {links}"),
    "edit": ("Edit", "编辑"),
    "edit_label": ("Edit memory m{id}", "编辑记忆 m{id}"),
    "save": ("Save", "保存"),
    "archive": ("Archive", "归档"),
    "restore": ("Restore", "恢复"),
    "erase_dots": ("Erase…", "删除…"),
    "details": ("Details", "详情"),
    "actions_for": ("m{id}: ", "m{id}："),
    # -- fields ---------------------------------------------------------------------
    "content": ("Content", "内容"),
    "tier": ("Tier", "层级"),
    "category": ("Category", "类别"),
    "category_default": ("default (identity for tier 1, decision for tier 2)",
                         "默认（第 1 层为身份，第 2 层为决定）"),
    "project": ("Project", "项目"),
    "topic": ("Topic", "主题"),
    "search_terms_label": ("Found by (search terms, comma-separated; never shown as the fact)",
                           "检索词（逗号分隔；不作为记忆内容显示）"),
    "importance_label": ("Importance", "重要性"),
    "cat_identity": ("identity", "身份"),
    "cat_config": ("config", "配置"),
    "cat_credential": ("credential", "凭据"),
    "cat_decision": ("decision", "决定"),
    "cat_solution": ("solution", "解决办法"),
    "cat_event": ("event", "事件"),
    "cat_conversation": ("conversation", "对话"),
    "cat_temp": ("temp", "临时"),
    "cat_debug": ("debug", "调试"),
    # -- stats --------------------------------------------------------------------
    "statistics": ("statistics", "统计"),
    "total": ("Total", "总计"),
    "tile_active": ("Active", "有效"),
    "tile_active_hint": ("active memories: what the bot can recall", "有效记忆：机器人能回想起的内容"),
    "tile_profile": ("Profile", "个人档案"),
    "tile_profile_hint": ("tier 1: always in the prompt (active)", "第 1 层：总在提示词里（有效）"),
    "tile_knowledge": ("Knowledge", "知识"),
    "tile_knowledge_hint": ("tier 2: recalled when relevant (active)", "第 2 层：相关时才回想（有效）"),
    "tile_auto": ("Auto-extracted", "自动提取"),
    "tile_auto_hint": ("extracted or compressed from conversations (active)", "从对话中提取或压缩而来（有效）"),
    "tile_manual": ("By hand", "手动"),
    "tile_manual_hint": ("added by hand: this page, the CLI or the bot's memory_save (active)",
                         "手动添加：本页面、命令行或机器人的 memory_save（有效）"),
    "tile_migrated": ("Migrated", "迁移"),
    "tile_migrated_hint": ("imported from MEMORY.md / daily files (active)", "从 MEMORY.md / 每日文件导入（有效）"),
    "tile_archived": ("Archived", "已归档"),
    "tile_archived_hint": ("hidden from the bot, restorable", "机器人看不到，可恢复"),
    "tile_superseded": ("Superseded", "旧版本"),
    "tile_superseded_hint": ("replaced by a newer fact", "已被更新的事实取代"),
    "tile_events": ("Events", "事件"),
    "tile_events_hint": ("tier 3 conversation summaries", "第 3 层对话摘要"),
    "tile_buffered": ("Buffered", "待学习"),
    "tile_buffered_hint": ("messages waiting for extraction", "等待提取的消息"),
    "tile_set_aside": ("Set aside", "未能学习"),
    "tile_set_aside_hint": ("messages the memory model could not take even one at a time: kept, not retried until "
                            "asked (Try again, below, or myclaw memory retry-set-aside)",
                            "记忆模型连单条都处理不了的消息：已保留，要求后才重试"
                            "（下方“重试”，或 myclaw memory retry-set-aside）"),
    "set_aside_text": ("{n} buffered lines were set aside: the memory model could not take them. "
                       "After changing it for one with a larger context: ",
                       "有 {n} 行待学习的消息被暂存：记忆模型处理不了。换成上下文更大的模型后："),
    "try_again": ("Try them again", "重试"),
    # -- a user's page --------------------------------------------------------------
    "tab_active": ("Active", "有效"),
    "tab_archived": ("Archived", "已归档"),
    "tab_superseded": ("Superseded", "旧版本"),
    "tab_all": ("All", "全部"),
    "tabs_label": ("Show", "显示"),
    "filter_category": ("Category", "类别"),
    "all_categories": ("all categories", "全部类别"),
    "filter": ("Filter", "筛选"),
    "has_label": ("Words", "包含文字"),
    "has_placeholder": ("words the memory holds", "记忆里的文字"),
    "every_holding": ("Every memory holding “{words}” →", "列出所有包含“{words}”的记忆 →"),
    "none_holding": ("No {status} memories holding “{words}”", "没有包含“{words}”的{status}记忆"),
    "search_placeholder": ("Search {user}'s memories as the bot would recall them…",
                           "像机器人回想那样搜索 {user} 的记忆…"),
    "search_label": ("Search memories", "搜索记忆"),
    "search": ("Search", "搜索"),
    "clear": ("Clear", "清除"),
    "found_head": ("{memories} the bot would recall for “{query}”, best first (active memories of {user}{also}).",
                   "机器人对“{query}”会回想起 {memories}，最相关的在前（{user}{also} 的有效记忆）。"),
    "found_also_global": (" and _global", " 和 _global"),
    "nothing_found": ("Nothing found", "没有找到"),
    "nothing_found_text": ("No active memory of {user} matches “{query}”. Archived memories are not searched.",
                           "{user} 没有与“{query}”匹配的有效记忆。已归档的记忆不参与搜索。"),
    "matching_events": ("Matching events (tier 3)", "匹配的事件（第 3 层）"),
    "no_more": ("No more memories", "没有更多记忆了"),
    "no_more_text": ("You are past the last page.", "已经过了最后一页。"),
    "user_empty": ("{user} has no memories yet", "{user} 还没有记忆"),
    "user_empty_text": ("The bot extracts facts from conversations in the background; you can also add one by hand.",
                        "机器人会在后台从对话中提取事实；你也可以手动添加。"),
    "none_in_tab": ("No {status} memories", "没有{status}记忆"),
    "none_in_category": ("No {status} memories in “{category}”", "“{category}”里没有{status}记忆"),
    "nothing_here": ("Nothing here.", "这里什么也没有。"),
    "newer": ("← Newer", "← 较新"),
    "older": ("Older →", "较旧 →"),
    "pages": ("pages", "翻页"),
    "newest": ("↑ Newest", "↑ 最新"),
    "shown": ("{first}–{last} of {total}", "第 {first}–{last} 条，共 {total} 条"),
    "add_title": ("Add a memory for {user}", "为 {user} 添加记忆"),
    "add_text": ("Stored as “Added by hand”; the bot recalls it like any other memory{everyone}.",
                 "存为“手动添加”；机器人会像其他记忆一样回想它{everyone}。"),
    "add_everyone": (", for every user", "，对所有用户"),
    "add_memory": ("Add memory", "添加记忆"),
    "add_button": ("+ Add memory", "+ 添加记忆"),
    "cancel": ("Cancel", "取消"),
    "change_log": ("Change log", "变更日志"),
    "renamed_projects": ("Renamed projects (old name → new name, facts filed under the new): {names}",
                         "改过名的项目（旧名 → 新名，记忆归在新名下）：{names}"),
    "export": ("Export", "导出"),
    "export_hint": ("Download all of {user}'s memories as Markdown", "把 {user} 的全部记忆下载为 Markdown"),
    "clear_title": ("Clear this user's memories", "清空此用户的记忆"),
    "clear_archive_text": ("Archive every active memory of <b>{user}</b> ({n}): they leave the bot's recall and "
                           "can be restored one by one from the Archived tab.",
                           "归档 <b>{user}</b> 的全部有效记忆（{n} 条）：机器人不再回想它们，"
                           "可在“已归档”标签中逐条恢复。"),
    "archive_all_dots": ("Archive all…", "全部归档…"),
    "clear_erase_text": ("Or erase all {memories} of <b>{user}</b> for good (all statuses; cannot be undone).",
                         "或者永久删除 <b>{user}</b> 的全部 {memories}（所有状态；无法撤销）。"),
    "erase_all_dots": ("Erase all for good…", "全部永久删除…"),
    # -- a memory's page -------------------------------------------------------------
    "memory_title": ("Memory m{id}", "记忆 m{id}"),
    "provenance": ("Provenance", "来源"),
    "p_owner": ("Owner", "所属用户"),
    "p_status": ("Status", "状态"),
    "p_source": ("Source", "来源"),
    "p_channel": ("Channel", "渠道"),
    "p_chat": ("Chat", "会话"),
    "p_session": ("Session", "会话段"),
    "p_said": ("Said", "说于"),
    "p_messages": ("Messages", "消息"),
    "p_refs": ("Refs", "引用"),
    "p_drawn_from": ("Drawn from", "出自"),
    "p_found_by": ("Found by", "检索词"),
    "p_created": ("Created", "创建于"),
    "p_updated": ("Updated", "更新于"),
    "p_recalled": ("Last recalled", "上次回想"),
    "recalled_times": ("{when} ({times})", "{when}（{times}）"),
    "never": ("never", "从未"),
    "replaced_by_h": ("Replaced by", "已被取代为"),
    "this_replaced_h": ("This fact replaced", "这条事实取代了"),
    "no_versions": ("No earlier or later version of this fact.", "这条事实没有更早或更晚的版本。"),
    "no_log_for_memory": ("No log entries for this memory.", "这条记忆没有日志。"),
    # -- change log ------------------------------------------------------------------
    "log_title": ("Change log: {user}", "变更日志：{user}"),
    "log_text": ("What extraction, compression, the bot (asked to forget), this page and <code>myclaw memory</code> "
                 "changed, newest first (the same log as <code>myclaw memory log</code>).",
                 "提取、压缩、机器人（被要求忘记时）、本页面和 <code>myclaw memory</code> 做过的改动，"
                 "最新的在前（与 <code>myclaw memory log</code> 是同一份日志）。"),
    "log_empty": ("No changes logged", "没有记录到改动"),
    "log_empty_text": ("Nothing has changed this user's memories through the write path or this page yet.",
                       "还没有任何写入流程或本页面改动过此用户的记忆。"),
    "col_when": ("When", "时间"),
    "col_job": ("Job", "任务"),
    "col_action": ("Action", "操作"),
    "col_memory": ("Memory", "记忆"),
    "col_detail": ("Detail", "详情"),
    # -- erase -----------------------------------------------------------------------
    "erase_q": ("Erase memory m{id} for good?", "永久删除记忆 m{id}？"),
    "erase_text": ("This deletes it from the database; it cannot be restored. To hide it from the bot but keep it, "
                   "archive it instead.", "这会把它从数据库中删除，无法恢复。若只想让机器人看不到但保留它，请改为归档。"),
    "versions_of": ("{versions} of this fact (the versions it replaced, the originals a weekly merge folded into it):",
                    "这条事实的 {versions}（它取代的版本，以及每周合并并入它的原始记忆）："),
    "entries_on": ("{entries} built on it (in every system prompt):", "基于它的 {entries}（在每个系统提示词中）："),
    "built_h": ("Built on it, erased only with its history", "基于它的内容，只在连同历史删除时删除"),
    "built_note": ("With its history also go the messages that said it, still waiting for extraction or in the "
                   "recent conversation, so the bot does not learn it again.",
                   "连同历史删除时，说过它、仍在等待提取或在最近对话中的消息也会删除，免得机器人再次学到它。"),
    "nothing_built": ("No older version of it and no Core Memory entry built on it.",
                      "它没有旧版本，也没有基于它的核心记忆条目。"),
    "kept_h": ("Linked records that stay either way", "无论如何都会保留的相关记录"),
    "kept_note": ("A summary often holds several facts, so these are not erased; edit or erase them yourself if "
                  "they say the same.", "一份摘要常包含多条事实，所以这些不会删除；如果它们说的是同一件事，请自行编辑或删除。"),
    "kept_facts": ("Facts it was drawn from (the weekly refresh could write it again from them):",
                   "它所依据的事实（每周更新可能据此再次写出它）："),
    "kept_events": ("Daily events of the same conversation (kept; they may still say it, and recall can show them):",
                    "同一对话的每日事件（保留；其中可能仍提到它，回忆时也可能出现）："),
    "erase_with_history": ("Erase it with its history and the Core Memory entries built on it ({rows})",
                           "连同其历史和基于它的核心记忆条目一起删除（{rows}）"),
    "erase_row_only": ("Erase this row only", "只删除这一条"),
    "erase_for_good": ("Erase for good", "永久删除"),
    "archive_instead": ("Archive instead", "改为归档"),
    "group_notes_h": ("The group {group}'s notes", "群聊 {group} 的笔记"),
    "group_notes_empty": ("No notes kept for this group", "这个群聊没有保存笔记"),
    "said_by_names": ("said by {names}", "{names} 说的"),
    "edit_group_note": ("Edit the group's note m{id}", "编辑群聊笔记 m{id}"),
    "erase_group_note_q": ("Erase the group's note m{id} for good?", "永久删除群聊笔记 m{id}？"),
    "erase_group_note_text": ("This deletes it from the database; it cannot be restored. Its older versions go with it, "
                              "and the group's messages still waiting for extraction that repeat it, so the bot does "
                              "not learn it again.",
                              "这会把它从数据库中删除，无法恢复。它的旧版本也会删除，群聊中仍在等待提取、重复它的消息也会删除，"
                              "免得机器人再次学到它。"),
    "erase_all_q": ("Erase all {memories} of {user} for good?", "永久删除 {user} 的全部 {memories}？"),
    "erase_all_text": ("Every memory of <b>{user}</b>, active, archived and superseded, is deleted from the database. "
                       "This cannot be undone. Their conversation summaries, history, scheduled jobs and files stay: "
                       "<code>myclaw memory forget --user</code> erases everything.",
                       "<b>{user}</b> 的每条记忆（有效、已归档和旧版本）都会从数据库中删除。无法撤销。"
                       "对话摘要、对话记录、定时任务和文件会保留：<code>myclaw memory forget --user</code> 会删除全部。"),
    "type_name": ("Type the user name <b>{user}</b> to confirm", "输入用户名 <b>{user}</b> 以确认"),
    "erase_all": ("Erase all for good", "全部永久删除"),
    "name_mismatch": ("The name you typed does not match; nothing was erased.", "输入的名字不对，什么也没有删除。"),
    "erase_chat_running": ("A terminal chat (myclaw chat) or another erasure is running on this home, and a chat "
                           "would write back what it holds of {user} after the erasure. Nothing was erased; try "
                           "again once it has ended.",
                           "本机上正在运行终端对话（myclaw chat）或另一项删除，删除后对话会把它保存的 {user} 的内容写回。"
                           "什么也没有删除；请在它结束后重试。"),
    "archive_all_q": ("Archive {which} {count} active {noun} of {user}?", "归档 {user} 的 {count} 条有效记忆？"),
    "archive_all_text": ("The bot stops recalling them. They stay in the database and can be restored one by one "
                         "from the Archived tab.", "机器人不再回想它们。它们仍在数据库中，可在“已归档”标签中逐条恢复。"),
    "archive_all_yes": ("Yes, archive all", "确定，全部归档"),
    # -- errors (gateway/web/_actions.py AdminError.key; the English is the API's message) ----
    "err_user_empty": ("user is empty", "用户为空"),
    "err_user_string": ("user must be a string", "user 必须是字符串"),
    "err_required": ("{name} is required", "缺少 {name}"),
    "err_int": ("{name} must be an integer, got {value}", "{name} 必须是整数，收到的是 {value}"),
    "err_range": ("{name} must be within [{lo}, {hi}], got {value}", "{name} 必须在 [{lo}, {hi}] 之内，收到的是 {value}"),
    "err_status": ("unknown status {value} (active, archived, superseded or all)",
                   "未知的状态 {value}（可选 active、archived、superseded 或 all）"),
    "err_category": ("unknown category {value} (one of {choices})", "未知的类别 {value}（可选 {choices}）"),
    "err_content_empty": ("content is empty", "内容为空"),
    "err_content_long": ("content is {n} characters; a memory holds at most {most}",
                         "内容有 {n} 个字符；一条记忆最多 {most} 个字符"),
    "err_importance": ("importance must be a number within [0, 1], got {value}", "重要性必须是 [0, 1] 之间的数，收到的是 {value}"),
    "err_tier": ("tier must be 1 or 2, got {value}", "层级必须是 1 或 2，收到的是 {value}"),
    "err_terms": ("search terms: each at most 40 characters, at most 12, none shaped like a key or password",
                  "检索词：每个至多 40 个字符，至多 12 个，不得像密钥或密码"),
    "err_terms_type": ("search_terms must be a string or a list of strings", "search_terms 必须是字符串或字符串列表"),
    "err_terms_credential": ("a credential is found by its own words only; give it no search terms",
                             "凭据只按其本身的文字检索，不能有检索词"),
    "err_export_unknown": ("nothing is stored about {user}, so there is nothing to export",
                           "没有保存任何关于 {user} 的内容，没有可导出的"),
    "err_export_unknown_near": ("nothing is stored about {user}, so there is nothing to export (did you mean {near}?)",
                                "没有保存任何关于 {user} 的内容，没有可导出的（要找的是不是 {near}？）"),
    "err_not_found": ("no memory with id {id}", "没有编号为 {id} 的记忆"),
    "err_not_found_for": ("no memory with id {id} for user {user}", "用户 {user} 没有编号为 {id} 的记忆"),
    "err_undo_gone": ("this undo has expired or was used already; nothing was changed",
                      "这个撤销已过期或已用过；什么也没有改动"),
    "err_undo_changed": ("memory m{id} was changed since; nothing was changed", "记忆 m{id} 之后又被改过；什么也没有改动"),
    "err_nothing": ("nothing to change: give {fields}", "没有要改的内容：请填写 {fields}"),
    "try_again_below": ("Nothing was saved. Correct it and send it again:", "什么也没有保存。改正后再提交一次："),
    # -- counts ------------------------------------------------------------------------
    "memory_1": ("{n} memory", "{n} 条记忆"),
    "memory_n": ("{n} memories", "{n} 条记忆"),
    "version_1": ("{n} older version", "{n} 个旧版本"),
    "version_n": ("{n} older versions", "{n} 个旧版本"),
    "entry_1": ("{n} Core Memory entry", "{n} 条核心记忆条目"),
    "entry_n": ("{n} Core Memory entries", "{n} 条核心记忆条目"),
    "row_1": ("{n} row", "{n} 条"),
    "row_n": ("{n} rows", "{n} 条"),
    "time_1": ("{n} time", "{n} 次"),
    "time_n": ("{n} times", "{n} 次"),
}


# The change log's codes (memory_log.job / .action, written by the write
# path, this page and the CLI): Chinese words for the Chinese page; the
# English page shows the codes, as `myclaw memory log` does.
LOG_WORDS_ZH: dict[str, str] = {
    "web": "记忆管理页", "cli": "命令行", "chat": "对话", "extraction": "提取", "daily_compress": "每日压缩",
    "weekly_compress": "每周压缩",
    "add": "添加", "edit": "编辑", "archive": "归档", "archive_all": "全部归档", "restore": "恢复", "erase": "删除",
    "erase_all": "全部删除", "forget": "忘记", "supersede": "被取代", "merge": "合并", "merge_identity": "合并身份",
    "merge_rejected": "拒绝合并", "profile_rejected": "拒绝写入档案", "promote": "提升为个人档案",
    "promote_held": "暂缓提升", "merge_kept": "合并未改动", "profile_kept": "档案未改动", "demote": "降为知识", "demote_held": "暂缓降级", "reinforce": "强化", "profile_read": "档案已读入",
    "recall": "回想", "decay": "衰减", "drop": "丢弃", "skip": "跳过", "backlog": "积压", "run": "运行",
    "set-aside": "暂存", "retry-set-aside": "重试暂存", "share": "共享", "unshare": "取消共享", "retag": "标出同名",
}


def _chinese(tag: str) -> Lang:
    """``zh-Hant*``, ``zh-TW``, ``zh-HK``, ``zh-MO``: Traditional; a script
    said outright wins over the region (``zh-Hans-HK``); else Simplified."""
    parts = tag.split("-")[1:]
    if "hant" in parts:
        return "zh-Hant"
    if "hans" in parts:
        return "zh"
    return "zh-Hant" if any(p in _HANT_REGIONS for p in parts) else "zh"


def pick_lang(accept_language: str, chosen: str = "") -> Lang:
    """The page's language: ``chosen`` (the switch's cookie) when it names
    one, else the first English or Chinese tag of ``Accept-Language`` by
    its weight (``zh-CN``, ``zh-Hans``: Simplified; ``zh-TW``, ``zh-HK``:
    Traditional), else English."""
    for lang in LANGS:
        if chosen == lang:
            return lang
    ranked: list[tuple[float, int, Lang]] = []
    for i, part in enumerate(accept_language.split(",")[:30]):  # a header is not a reason to loop long
        tag, _, params = part.strip().partition(";")
        q = 1.0
        for param in params.split(";"):
            name, _, value = param.strip().partition("=")
            if name.strip().lower() == "q":
                try:
                    q = float(value)
                except ValueError:
                    q = 0.0
        tag = tag.strip().lower()
        primary = tag.split("-")[0]
        if q > 0 and primary in ("en", "zh"):
            ranked.append((-q, i, "en" if primary == "en" else _chinese(tag)))
    return min(ranked)[2] if ranked else "en"


class Words:
    """The catalogue in one language: ``t("key", field=...)``."""

    def __init__(self, lang: Lang = "en", tz: tzinfo = UTC) -> None:
        self.lang: Lang = lang
        self.tz = tz  # the gateway's (gateway.timezone): times are shown on its clock
        self._i = 0 if lang == "en" else 1
        self._hant = lang == "zh-Hant"

    @property
    def zone(self) -> str:
        return str(getattr(self.tz, "key", None) or self.tz.tzname(None) or "UTC")

    @property
    def zh(self) -> bool:
        """Chinese, in either script."""
        return self.lang != "en"

    @property
    def html_lang(self) -> str:
        return LANGS[self.lang][1]

    def __call__(self, key: str, **fields: object) -> str:
        # Converted before the fields go in: a user's name or words are never changed.
        return (_HANT[key] if self._hant else CATALOGUE[key][self._i]).format(**fields)

    def chinese(self, text: str) -> str:
        """Simplified Chinese words made elsewhere (memory/origin.py) in this page's script."""
        return to_hant(text) if self._hant else text

    def code(self, code: str) -> str:
        """A change log code (job, action) in words: Chinese on the Chinese
        page when known, else the code itself."""
        return self.chinese(LOG_WORDS_ZH.get(code, code)) if self.zh else code

    def count(self, noun: str, n: int) -> str:
        """``noun`` in ``memory``, ``version``, ``entry``, ``row``, ``time``: "1 memory", "3 条记忆"."""
        return self(f"{noun}_1" if n == 1 else f"{noun}_n", n=n)

    def when(self, ts: str) -> str:
        """``2026-03-01T12:00:00Z`` -> ``2026-03-01 12:00`` or ``2026年3月1日 12:00``
        on the gateway's clock (:attr:`tz`)."""
        if not ts:
            return "-"
        try:
            at = parse_ts(ts).astimezone(self.tz)
        except ValueError:  # not ours: shown as it is
            return ts[:16].replace("T", " ")
        return f"{at.year}年{at.month}月{at.day}日 {at:%H:%M}" if self.zh else f"{at:%Y-%m-%d %H:%M}"


_HANT: dict[str, str] = {key: to_hant(zh) for key, (_, zh) in CATALOGUE.items()}
