"""Traditional Chinese (zh-Hant, as read in Taiwan and Hong Kong) from the
page's Simplified catalogue, by a hand-written table: no converter
dependency for a few hundred strings.

:func:`to_hant` first swaps the words Taiwan says differently (用户 ->
使用者, 数据库 -> 資料庫, 搜索 -> 搜尋, quotes “” -> 「」), then maps each
character. ``CHARS`` covers every Simplified character the catalogue,
the change log's words and memory/origin.py's phrases use (a test keeps it
so); a character it lacks is shown as it is, which a Traditional reader
still reads.
"""

from __future__ import annotations

__all__ = ["CHARS", "PHRASES", "to_hant"]

# Longest first where one contains another (退出登录 before 登录).
PHRASES: tuple[tuple[str, str], ...] = (
    ("退出登录", "登出"), ("登录", "登入"), ("用户名", "使用者名稱"), ("用户", "使用者"), ("数据库", "資料庫"),
    ("默认", "預設"), ("搜索", "搜尋"), ("消息", "訊息"), ("文件", "檔案"), ("日志", "日誌"), ("重复", "重複"),
    ("项目", "專案"), ("标签", "標籤"), ("导出", "匯出"), ("导入", "匯入"), ("刷新", "重新整理"), ("字符", "字元"),
    ("后台", "背景"), ("“", "「"), ("”", "」"), ("‘", "『"), ("’", "』"),
)

_PAIRS = (
    "与與 丢丟 个個 临臨 为為 么麼 习習 书書 于於 从從 们們 会會 侧側 关關 内內 写寫 决決 减減 凭憑 创創 删刪 别別 办辦 务務 动動 单單 历歷 压壓 参參 发發 号號 后後 员員 处處 复復 学學 "
    "实實 对對 导導 将將 层層 属屬 并並 库庫 开開 弃棄 强強 归歸 录錄 忆憶 态態 总總 户戶 择擇 换換 据據 数數 无無 旧舊 时時 显顯 暂暫 机機 条條 来來 标標 样樣 档檔 检檢 汇匯 没沒 状狀 "
    "现現 确確 积積 笔筆 筛篩 签簽 类類 级級 终終 经經 绝絕 统統 缓緩 编編 缩縮 见見 计計 认認 让讓 记記 论論 识識 诉訴 词詞 试試 话話 详詳 说說 请請 调調 转轉 载載 较較 辑輯 输輸 迁遷 "
    "过過 运運 还還 这這 连連 选選 里裡 销銷 错錯 间間 页頁 项項 须須 题題 飞飛 称稱 专專 资資 预預 订訂 链鏈 设設 网網 长長 门門 问問 应應 该該 组組 结結 给給 线線 图圖 读讀 语語 义義 "
    "变變 码碼 钥鑰"
)
CHARS: dict[str, str] = {pair[0]: pair[1] for pair in _PAIRS.split()}
_TABLE: dict[int, str] = {ord(k): v for k, v in CHARS.items()}


def to_hant(text: str) -> str:
    """Simplified Chinese text in Traditional characters and Taiwan's words."""
    for simplified, traditional in PHRASES:
        text = text.replace(simplified, traditional)
    return text.translate(_TABLE)
