"""Cross-source duplicate collapse sees CJK and Thai text (shingles of MMR's script-aware units).

With ``\\w+`` a Chinese sentence was one "word" (so a whole archived conversation made a handful of
shingles and was never called a duplicate), and Thai fell apart at its vowel and tone marks.
"""

from __future__ import annotations

from typing import Any

from sessionmem.memory.search.ranking import (
    DUPLICATE_MIN_SHINGLES,
    Candidate,
    collapse_cross_source,
    mmr_tokens,
    shingles,
    text_units,
)


def cand(source: str, text: str, score: float) -> Any:
    return Candidate(f"{source}:{score}", source, source, 1, 1, text, merged=score)


# What the /new hook archives (``user: …`` lines) and the same turns flattened from the transcript
# (``User: …``, whitespace collapsed), with one clause worded differently in the transcript copy.
ZH_ARCHIVE = (
    "user: 我们下周五把数据库迁移到新的服务器，记得提前备份所有的客户数据。\n"
    "assistant: 好的，我会在周四晚上完成备份，并通知运维团队准备迁移窗口。"
)
ZH_TRANSCRIPT = (
    "User: 我们下周五把数据库迁移到新的服务器，记得提前备份所有的客户数据。 "
    "Assistant: 好的，我会在周四夜里完成备份，并通知运维团队准备迁移窗口。"
)
TH_ARCHIVE = (
    "user: สัปดาห์หน้าเราจะย้ายฐานข้อมูลไปยังเซิร์ฟเวอร์ใหม่ อย่าลืมสำรองข้อมูลลูกค้าทั้งหมดก่อน\n"
    "assistant: ได้เลย ฉันจะสำรองข้อมูลในคืนวันพฤหัสและแจ้งทีมปฏิบัติการให้เตรียมช่วงเวลาย้ายระบบ"
)
TH_TRANSCRIPT = (
    "User: สัปดาห์หน้าเราจะย้ายฐานข้อมูลไปยังเซิร์ฟเวอร์ใหม่ อย่าลืมสำรองข้อมูลลูกค้าทั้งหมดก่อน "
    "Assistant: ได้เลย ฉันจะสำรองข้อมูลในคืนวันศุกร์และแจ้งทีมปฏิบัติการให้เตรียมช่วงเวลาย้ายระบบ"
)


def test_a_chinese_conversation_archived_and_in_its_transcript_comes_back_once() -> None:
    assert len(shingles(ZH_ARCHIVE)) >= DUPLICATE_MIN_SHINGLES
    kept = collapse_cross_source([cand("sessions", ZH_TRANSCRIPT, 0.5), cand("memory", ZH_ARCHIVE, 0.5)])
    assert [c.source for c in kept] == ["memory"]
    better = collapse_cross_source([cand("memory", ZH_ARCHIVE, 0.4), cand("sessions", ZH_TRANSCRIPT, 0.6)])
    assert [c.source for c in better] == ["sessions"]


def test_a_thai_conversation_archived_and_in_its_transcript_comes_back_once() -> None:
    assert len(shingles(TH_ARCHIVE)) >= DUPLICATE_MIN_SHINGLES
    kept = collapse_cross_source([cand("sessions", TH_TRANSCRIPT, 0.5), cand("memory", TH_ARCHIVE, 0.5)])
    assert [c.source for c in kept] == ["memory"]
    # A short exchange: ``\\w+`` cut it at every vowel mark into 12 pieces (9 shingles, 5 shared).
    short_archive = "user: ย้ายฐานข้อมูลวันศุกร์นี้\nassistant: ได้ จะสำรองข้อมูลก่อน"
    short_transcript = "User: ย้ายฐานข้อมูลวันศุกร์นี้ Assistant: ได้ จะสำรองข้อมูลก่อนนะ"
    kept = collapse_cross_source(
        [cand("memory", short_archive, 0.5), cand("sessions", short_transcript, 0.6)]
    )
    assert [c.source for c in kept] == ["sessions"]


def test_different_cjk_texts_on_the_same_topic_are_both_kept() -> None:
    # Same topic and many of the same words (数据, 迁移, 服务器, 客户, 备份), different text.
    other_zh = "团队决定把服务器迁移推迟到下个月，因为客户数据的备份还没有完成，数据库也需要先升级。"
    assert len(collapse_cross_source([cand("memory", ZH_ARCHIVE, 0.5), cand("sessions", other_zh, 0.5)])) == 2
    ja_a = (
        "user: 来週の金曜日にデータベースを新しいサーバーへ移行します。"
        "事前にお客様のデータをバックアップしてください。"
    )
    ja_b = (
        "サーバーの移行は来月に延期になりました。"
        "バックアップがまだ終わっていないので、データベースの更新も後にします。"
    )
    assert len(collapse_cross_source([cand("memory", ja_a, 0.5), cand("sessions", ja_b, 0.5)])) == 2
    other_th = "ทีมตัดสินใจเลื่อนการย้ายเซิร์ฟเวอร์ไปเดือนหน้า เพราะการสำรองข้อมูลลูกค้ายังไม่เสร็จ"
    assert len(collapse_cross_source([cand("memory", TH_ARCHIVE, 0.5), cand("sessions", other_th, 0.5)])) == 2


def test_shingles_are_runs_of_the_mmr_units() -> None:
    text = "User: Deploy 数据库 on ข้าวใหม่ day"
    units = text_units("Deploy 数据库 on ข้าวใหม่ day")
    assert units == ["deploy", "数据", "据库", "on", "ข้า", "าว", "วใ", "ให", "หม่", "day"]
    assert mmr_tokens(text) == frozenset(["user", *units])
    assert shingles(text) == frozenset(tuple(units[i : i + 4]) for i in range(len(units) - 3))
