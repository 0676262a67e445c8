"""Lay LoCoMo conversations out as agent workspaces, the way ``../shared/recall/locomo-dev`` is laid out.

The development split in ``../shared/recall/`` holds 5 of LoCoMo's 10 conversations; the other 5 are the
held-out check the recall figures must also hold on (README, "Recall"). This script rebuilds either from
LoCoMo's own file, ``data/locomo10.json`` of the public repository snap-research/locomo (CC BY-NC 4.0,
evaluation only: fetch it yourself; nothing of it is kept in this repository), byte for byte as the
development split was made:

    python bench/locomo_layout.py locomo10.json OUT --conversations conv-44,conv-47,conv-48,conv-49,conv-50 \
        --check ../shared/recall/locomo-dev --split "held-out: 5 of LoCoMo's 10 conversations"
    python bench/bench_recall.py --data OUT --only minilm --layout memory

``--check ../shared/recall/locomo-dev`` first rebuilds that split in a scratch folder and compares every
file with it, its manifest included (a mismatch exits with 1 and names the file), so a held-out split made
by the same code is known to be laid out alike; that split's ``LICENSE.txt`` is copied into ``OUT`` and
its harness ``eval_recall.py`` beside ``OUT`` (the bench loads the harness from the data's parent folder).

Each conversation becomes ``memory/YYYY-MM-DD.md`` (one daily log per session date, sessions of one
day appended; one turn per line, ``- [D3:7] Name: text``, an image's caption as ``[shared image: ...]``),
``sessions/session_<n>.jsonl`` (the same turns as transcript lines, 30 s apart from the session's
start), ``qa.jsonl`` (each question with its evidence resolved to files and lines; evidence written
``D8:6; D9:17``, ``D:11:26`` or ``D30:05`` in the source is read as the turns it names, what names no
turn is kept in ``evidence_unresolved``) and ``dialogs.json`` (where each turn stands). The manifest lists
the split's conversations and, as the development split's does, totals over the whole file.
"""

from __future__ import annotations

import argparse
import filecmp
import hashlib
import json
import re
import shutil
import sys
import tempfile
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

CATEGORY_NAMES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop", 5: "adversarial"}
MONTHS = ("january", "february", "march", "april", "may", "june", "july", "august", "september", "october",
          "november", "december")  # fmt: skip
SESSION_TIME = re.compile(r"\s*(\d{1,2}):(\d{2})\s*(am|pm)\s+on\s+(\d{1,2})\s+(\w+),?\s+(\d{4})", re.I)
SESSION_KEY = re.compile(r"session_(\d+)")
EVIDENCE_SEPARATORS = re.compile(r"[;\s]+")
TURN_ID = re.compile(r"D:?(\d+):(\d+)")
TURN_SECONDS = 30
OPTIONS = {"same_day": "append", "captions": True, "session_content": "named"}


def session_start(text: str) -> datetime:
    """``1:56 pm on 8 May, 2023`` as a datetime; a clear error for anything else."""
    m = SESSION_TIME.match(text)
    if m is None or m.group(5).lower() not in MONTHS:
        raise ValueError(f"unreadable session time {text!r}")
    hour, minute, half, day, month, year = m.groups()
    hour24 = int(hour) % 12 + (12 if half.lower() == "pm" else 0)
    return datetime(int(year), MONTHS.index(month.lower()) + 1, int(day), hour24, int(minute))


def turn_text(turn: dict[str, Any]) -> str:
    """A turn's words on one line (runs of spaces as one), its image's caption after them."""
    text = " ".join(str(turn.get("text", "")).split())
    if turn.get("blip_caption"):
        text = f"{text} [shared image: {turn['blip_caption']}]"
    return text


def evidence_ids(raw: list[str]) -> list[str]:
    """The turn ids a question's evidence names: ``D8:6; D9:17`` is two, ``D:11:26`` is ``D11:26`` and
    ``D30:05`` is ``D30:5``; what is not of that shape is kept as written (and names no turn)."""
    ids = [part for entry in raw for part in EVIDENCE_SEPARATORS.split(entry) if part]
    return [f"D{int(m[1])}:{int(m[2])}" if (m := TURN_ID.fullmatch(p)) else p for p in ids]


def render(conversation: dict[str, Any]) -> tuple[dict[str, str], dict[str, Any]]:
    """One conversation's workspace (path under ``<conv id>/`` -> text) and its manifest entry."""
    conv_id = conversation["sample_id"]
    talk = conversation["conversation"]
    speaker_a, speaker_b = talk["speaker_a"], talk["speaker_b"]
    roles = {speaker_a: "user", speaker_b: "assistant"}
    numbers = sorted(int(m.group(1)) for key in talk if (m := SESSION_KEY.fullmatch(key)) and talk[key])
    files: dict[str, str] = {}
    daily: dict[str, list[str]] = {}
    dialogs: dict[str, dict[str, Any]] = {}
    sessions = []
    turns = 0
    for number in numbers:
        said_at = talk[f"session_{number}_date_time"]
        start = session_start(said_at)
        sessions.append({"session": number, "date_time": said_at, "iso": _iso(start)})
        day = start.strftime("%Y-%m-%d")
        lines = daily.setdefault(day, [f"# {day}", ""])
        if len(lines) > 2:
            lines.append("")
        lines += [f"## Session {number} — {said_at} ({speaker_a} & {speaker_b})", ""]
        transcript = []
        for i, turn in enumerate(talk[f"session_{number}"]):
            text = turn_text(turn)
            turns += 1
            lines.append(f"- [{turn['dia_id']}] {turn['speaker']}: {text}")
            transcript.append(
                {
                    "type": "message",
                    "message": {"role": roles[turn["speaker"]], "content": f"{turn['speaker']}: {text}"},
                    "timestamp": _iso(start + timedelta(seconds=TURN_SECONDS * i)),
                }
            )
            dialogs[turn["dia_id"]] = {
                "session": number,
                "speaker": turn["speaker"],
                "memory_file": f"memory/{day}.md",
                "memory_line": len(lines),
                "session_file": f"sessions/session_{number}.jsonl",
                "session_line": i + 1,
            }
        files[f"{conv_id}/sessions/session_{number}.jsonl"] = "".join(map(_json_line, transcript))
    for day, lines in daily.items():
        files[f"{conv_id}/memory/{day}.md"] = "\n".join(lines) + "\n"
    document = {"conv_id": conv_id, "speaker_a": speaker_a, "speaker_b": speaker_b, "roles": roles}
    document |= {"sessions": sessions, "dialogs": dialogs}
    files[f"{conv_id}/dialogs.json"] = json.dumps(document, indent=1, ensure_ascii=False)
    questions, unresolved, unusable = [], 0, 0
    for n, qa in enumerate(conversation["qa"], 1):
        raw = list(qa.get("evidence", []))
        named = evidence_ids(raw)
        found = [e for e in named if e in dialogs]
        missing = [e for e in named if e not in dialogs]
        unresolved += bool(missing)
        unusable += not found
        row: dict[str, Any] = {"qid": f"{conv_id}:q{n:04d}", "conv_id": conv_id, "question": qa["question"]}
        row["answer"] = qa.get("answer")
        if "adversarial_answer" in qa:
            row["adversarial_answer"] = qa["adversarial_answer"]
        row |= {
            "category": qa["category"],
            "category_name": CATEGORY_NAMES[qa["category"]],
            "evidence": found,
            "evidence_raw": raw,
            "evidence_unresolved": missing,
            "evidence_files": [dialogs[e]["memory_file"] for e in found],
            "evidence_lines": [dialogs[e]["memory_line"] for e in found],
            "session_evidence_files": [dialogs[e]["session_file"] for e in found],
            "session_evidence_lines": [dialogs[e]["session_line"] for e in found],
        }
        questions.append(row)
    files[f"{conv_id}/qa.jsonl"] = "".join(map(_json_line, questions))
    days = sorted(daily)
    return files, {
        "conv_id": conv_id,
        "speakers": [speaker_a, speaker_b],
        "sessions": len(numbers),
        "turns": turns,
        "daily_files": len(daily),
        "questions": len(questions),
        "questions_with_unresolved_evidence": unresolved,
        "questions_without_usable_evidence": unusable,
        "first_date": days[0],
        "last_date": days[-1],
    }


def lay_out_all(source: Path, out: Path, wanted: list[str], split: str) -> dict[str, Any]:
    """The ``wanted`` conversations of LoCoMo's file under ``out``, with ``manifest.json`` (its totals are
    the whole file's, as the development split's manifest gives them)."""
    raw = source.read_bytes()
    data = json.loads(raw)
    known = [c["sample_id"] for c in data]
    unknown = sorted(set(wanted) - set(known))
    if unknown:
        raise SystemExit(
            f"{source.name} has no conversation {', '.join(unknown)} (it has {', '.join(known)})"
        )
    rendered = [render(c) for c in data]
    entries = [entry for _, entry in rendered]
    totals = {k: sum(e[k] for e in entries) for k in ("sessions", "turns", "daily_files", "questions")}
    totals |= {k: sum(e[k] for e in entries) for k in entries[0] if k.startswith("questions_")}
    manifest = {
        "source_sha256": hashlib.sha256(raw).hexdigest(),
        "options": OPTIONS,
        "category_names": {str(k): v for k, v in CATEGORY_NAMES.items()},
        "conversations": [entry for entry in entries if entry["conv_id"] in wanted],
        "totals": totals,
        "split": split,
    }
    for files, entry in rendered:
        if entry["conv_id"] in wanted:
            for name, text in files.items():
                (out / name).parent.mkdir(parents=True, exist_ok=True)
                (out / name).write_text(text, encoding="utf-8")
    out.mkdir(parents=True, exist_ok=True)
    (out / "manifest.json").write_text(json.dumps(manifest, indent=1, ensure_ascii=False), encoding="utf-8")
    return manifest


def check_against(source: Path, reference: Path) -> list[str]:
    """The files of ``reference`` (its conversations and its manifest) this script would write otherwise
    (none: laid out alike)."""
    manifest = json.loads((reference / "manifest.json").read_text(encoding="utf-8"))
    wanted = [c["conv_id"] for c in manifest["conversations"]]
    with tempfile.TemporaryDirectory(prefix="locomo-check-") as scratch:
        lay_out_all(source, Path(scratch), wanted, manifest.get("split", ""))
        mine = {p.relative_to(scratch) for p in Path(scratch).rglob("*") if p.is_file()}
        theirs = {p.relative_to(reference) for p in reference.rglob("*") if p.is_file()}
        theirs = {p for p in theirs if p.parts[0] in wanted or p.name == "manifest.json"}
        differ = sorted(mine ^ theirs)
        differ += sorted(
            p for p in mine & theirs if not filecmp.cmp(Path(scratch) / p, reference / p, shallow=False)
        )
        return [str(p) for p in differ]


def _iso(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%S.000Z")


def _json_line(row: dict[str, Any]) -> str:
    return json.dumps(row, ensure_ascii=False) + "\n"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("source", type=Path, help="LoCoMo's data/locomo10.json")
    p.add_argument("out", type=Path, help="the folder to lay the conversations out in")
    p.add_argument("--conversations", required=True, help="comma-separated ids, e.g. conv-44,conv-47")
    p.add_argument("--check", type=Path, help="a split laid out before (its manifest.json): compare first")
    p.add_argument("--split", default="held-out", help="the manifest's description of the split")
    args = p.parse_args()
    if args.check is not None:
        differ = check_against(args.source, args.check)
        if differ:
            print(f"laid out otherwise than {args.check.name}: {', '.join(differ[:10])}", file=sys.stderr)
            raise SystemExit(1)
        print(f"{args.check.name}: every file rebuilt byte for byte")
    wanted = [c.strip() for c in args.conversations.split(",") if c.strip()]
    manifest = lay_out_all(args.source, args.out, wanted, args.split)
    if args.check is not None:
        if (licence := args.check / "LICENSE.txt").is_file():
            shutil.copy(licence, args.out / licence.name)
        if (harness := args.check.parent / "eval_recall.py").is_file():
            shutil.copy(harness, args.out.parent / harness.name)  # bench_recall loads it beside the data
    questions = sum(entry["questions"] for entry in manifest["conversations"])
    print(f"{args.out}: {len(wanted)} conversations, {questions} questions")


if __name__ == "__main__":
    main()
