"""bench/locomo_layout.py lays LoCoMo conversations out as the recall benchmark reads them.

A hand-made conversation in LoCoMo's shape (``data/locomo10.json``) stands in for the real file, which
stays outside the repository: two sessions on one day, an image caption, spaced-out text, and evidence
written the ways the source writes it.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO_ROOT

sys.path.insert(0, str(REPO_ROOT / "bench"))
import locomo_layout

CONVERSATION = {
    "sample_id": "conv-90",
    "conversation": {
        "speaker_a": "Ada",
        "speaker_b": "Ben",
        "session_1_date_time": "9:05 am on 3 March, 2024",
        "session_1": [
            {"speaker": "Ada", "dia_id": "D1:1", "text": "I adopted  a cat   yesterday."},
            {"speaker": "Ben", "dia_id": "D1:2", "text": "What is her name?", "blip_caption": "a grey cat"},
            {"speaker": "Ada", "dia_id": "D1:3", "text": "Her name is Pixel."},
        ],
        "session_2_date_time": "6:30 pm on 3 March, 2024",
        "session_2": [{"speaker": "Ben", "dia_id": "D2:1", "text": "How is Pixel settling in?"}],
        "session_3_date_time": "11:00 am on 9 April, 2024",
        "session_3": [{"speaker": "Ada", "dia_id": "D3:1", "text": "Pixel learned to open doors."}],
    },
    "qa": [
        {
            "question": "What is Ada's cat called?",
            "answer": "Pixel",
            "evidence": ["D1:1; D1:3"],
            "category": 4,
        },
        {
            "question": "Who asked about Pixel?",
            "answer": "Ben",
            "evidence": ["D:2:1", "D3:01", "D9:9"],
            "category": 1,
        },
        {"question": "Is Ada a cat person?", "answer": "Yes", "evidence": [], "category": 3},
        {
            "question": "What did Ben's dog learn?",
            "evidence": ["D3:1"],
            "category": 5,
            "adversarial_answer": "x",
        },
    ],
}


@pytest.fixture
def source(tmp_path: Path) -> Path:
    path = tmp_path / "locomo10.json"
    path.write_text(json.dumps([CONVERSATION]), encoding="utf-8")
    return path


def questions(out: Path) -> list[dict]:
    return [json.loads(line) for line in (out / "conv-90" / "qa.jsonl").read_text().splitlines()]


def test_every_evidence_line_is_the_turn_it_names(source: Path, tmp_path: Path) -> None:
    out = tmp_path / "split"
    manifest = locomo_layout.lay_out_all(source, out, ["conv-90"], "test")
    for q in questions(out):
        where = zip(
            q["evidence"],
            q["evidence_files"],
            q["evidence_lines"],
            q["session_evidence_files"],
            q["session_evidence_lines"],
            strict=True,
        )
        for turn, file, line, transcript, row in where:
            said = (out / "conv-90" / file).read_text().splitlines()[line - 1]
            assert said.startswith(f"- [{turn}] ")
            message = json.loads((out / "conv-90" / transcript).read_text().splitlines()[row - 1])["message"]
            assert said == f"- [{turn}] {message['content']}"  # the same turn in both layouts
    entry = manifest["conversations"][0]
    assert (entry["sessions"], entry["turns"], entry["daily_files"]) == (3, 5, 2)
    assert (entry["questions_with_unresolved_evidence"], entry["questions_without_usable_evidence"]) == (1, 1)


def test_one_day_holds_both_sessions_and_turns_are_one_line(source: Path, tmp_path: Path) -> None:
    out = tmp_path / "split"
    locomo_layout.lay_out_all(source, out, ["conv-90"], "test")
    day = (out / "conv-90" / "memory" / "2024-03-03.md").read_text()
    assert day.startswith("# 2024-03-03\n\n## Session 1 — 9:05 am on 3 March, 2024 (Ada & Ben)\n\n")
    assert "- [D1:1] Ada: I adopted a cat yesterday.\n" in day
    assert "- [D1:2] Ben: What is her name? [shared image: a grey cat]\n" in day
    assert "\n\n## Session 2 — 6:30 pm on 3 March, 2024 (Ada & Ben)\n\n- [D2:1] Ben:" in day
    transcript = [json.loads(line) for line in (out / "conv-90" / "sessions" / "session_1.jsonl").open()]
    assert [r["timestamp"] for r in transcript] == [
        "2024-03-03T09:05:00.000Z",
        "2024-03-03T09:05:30.000Z",
        "2024-03-03T09:06:00.000Z",
    ]
    assert [r["message"]["role"] for r in transcript] == ["user", "assistant", "user"]


def test_evidence_is_read_as_the_source_writes_it(source: Path, tmp_path: Path) -> None:
    out = tmp_path / "split"
    locomo_layout.lay_out_all(source, out, ["conv-90"], "test")
    cat, who, none, adversarial = questions(out)
    assert cat["evidence"] == ["D1:1", "D1:3"] and cat["evidence_raw"] == ["D1:1; D1:3"]
    assert who["evidence"] == ["D2:1", "D3:1"] and who["evidence_unresolved"] == ["D9:9"]
    assert none["evidence"] == [] and none["category_name"] == "open-domain"
    assert adversarial["answer"] is None and adversarial["adversarial_answer"] == "x"


def test_check_names_a_file_laid_out_otherwise(source: Path, tmp_path: Path) -> None:
    reference = tmp_path / "reference"
    locomo_layout.lay_out_all(source, reference, ["conv-90"], "reference")
    assert locomo_layout.check_against(source, reference) == []
    day = reference / "conv-90" / "memory" / "2024-04-09.md"
    day.write_text(day.read_text().replace("doors", "windows"))
    assert locomo_layout.check_against(source, reference) == ["conv-90/memory/2024-04-09.md"]


def test_an_unknown_conversation_or_session_time_is_named(source: Path, tmp_path: Path) -> None:
    with pytest.raises(SystemExit, match="no conversation conv-99"):
        locomo_layout.lay_out_all(source, tmp_path / "out", ["conv-99"], "test")
    with pytest.raises(ValueError, match="unreadable session time 'noon on Monday'"):
        locomo_layout.session_start("noon on Monday")


def test_the_manifest_counts_the_whole_file_and_lists_the_split(tmp_path: Path) -> None:
    """As the development split's manifest does: its totals are LoCoMo's file's, its list the split's."""
    source = tmp_path / "locomo10.json"
    source.write_text(json.dumps([CONVERSATION, {**CONVERSATION, "sample_id": "conv-91"}]), encoding="utf-8")
    manifest = locomo_layout.lay_out_all(source, tmp_path / "split", ["conv-91"], "held-out")
    assert [c["conv_id"] for c in manifest["conversations"]] == ["conv-91"]
    assert manifest["totals"]["sessions"] == 6 and manifest["totals"]["questions"] == 8
    assert sorted(p.name for p in (tmp_path / "split").iterdir()) == ["conv-91", "manifest.json"]
