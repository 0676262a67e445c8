"""Reasoning blocks in a model's reply: ``<think>…</think>`` (and ``<thinking>``, ``<thought>``,
``<antthinking>``, namespaced ``<mm:think>``), which reasoning models write before their answer.

Trigger: a reasoning model answers ``<think>nothing to add</think>NO_REPLY``, or its answer after a
reasoning block. Why: the block is the model's scratch work, not for the user, and a ``NO_REPLY`` after
it is still a deliberate silence. Outcome: :func:`strip_reasoning` removes the blocks from the text the
user receives, before the silent-reply rules apply (:func:`sessionmem.model.noreply.deliverable_reply`),
as OpenClaw strips reasoning tags from reply text (``stripReasoningTagsFromText``, strict mode):

- tags are matched in any case, with attributes, spaces (``< think >``) and a namespace; nested blocks
  are removed whole; a self-closing tag (``<think/>``) is dropped alone;
- tags inside code (a fenced block, an inline code span) are text, left alone;
- a closing tag without its opening tag ends a block whose opening the provider left out: what came
  before it is dropped, unless nothing follows it;
- an opening tag never closed hides the rest, except when nothing comes before it: then its content is
  the answer (a malformed tag must not turn an answer into silence);
- ``<final>`` tags (some models wrap their answer in them) are removed, their content kept.

The transcript keeps the reply as the model wrote it; only what is delivered (and streamed,
``final=False``: an open block and a tag still being written are held back) is stripped. Pure.
"""

from __future__ import annotations

import re

_NAMES = r"(?:[\w-]+:)?(?:think(?:ing)?|thought|antthinking)"
_QUICK = re.compile(rf"<\s*/?\s*(?:{_NAMES}|final)(?=[\s/>])", re.IGNORECASE)
_FINAL_TAG = re.compile(r"<\s*/?\s*final(?=[\s/>])[^<>]*>", re.IGNORECASE)
_THINK_TAG = re.compile(rf"<\s*(/?)\s*{_NAMES}(?=[\s/>])[^<>]*>", re.IGNORECASE)
_SELF_CLOSING = re.compile(r"/\s*>$")
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})", re.MULTILINE)
_BACKTICKS = re.compile(r"`+")
_OPEN_TAG_TAIL = re.compile(r"<[^<>]{0,64}$")  # a tag still being streamed


def strip_reasoning(text: str, *, final: bool = True) -> str:
    """``text`` without its reasoning blocks (see the module docstring), trimmed. ``final=False`` for a
    streamed partial: an unclosed block is held back whole, a trailing ``<…`` too, nothing is trimmed."""
    if not text or not _QUICK.search(text):
        return text.strip() if final else _OPEN_TAG_TAIL.sub("", text)
    cleaned = _outside_code(_FINAL_TAG, text)
    code = code_regions(cleaned)
    out, dropped, depth, last, opened_at = "", None, 0, 0, -1
    for match in _THINK_TAG.finditer(cleaned):
        if _inside(match.start(), code):
            continue
        closing = match.group(1) == "/"
        self_closing = not closing and _SELF_CLOSING.search(match.group()) is not None
        if depth == 0:
            out += cleaned[last : match.start()]
            if closing:  # the end of a block whose opening tag the provider left out
                dropped, out = (dropped or "") + out, ""
            elif not self_closing:
                depth, opened_at = 1, match.end()
        elif closing:
            depth -= 1
        elif not self_closing:
            depth += 1
        last = match.end()
    if depth == 0:
        out += cleaned[last:]
    elif final and not out.strip() and not (dropped or "").strip():
        out = _THINK_TAG.sub("", cleaned[opened_at:])  # "<think>Answer…" with no closing tag: the answer
    if dropped is not None and not out.strip():
        out = dropped + out  # nothing after the closing tag: what came before was the answer
    if not final:
        return out if depth else _OPEN_TAG_TAIL.sub("", out)
    return out.strip()


def code_regions(text: str) -> list[tuple[int, int]]:
    """``(start, end)`` of the fenced code blocks (an unclosed fence runs to the end) and the inline code
    spans (a run of backticks closed by a run of the same length) in ``text``."""
    regions: list[tuple[int, int]] = []
    pos = 0
    while (fence := _FENCE.search(text, pos)) is not None:
        marker = fence.group(1)
        closing = re.compile(rf"^ {{0,3}}{re.escape(marker[0])}{{{len(marker)},}}[ \t]*$", re.MULTILINE)
        line_end = text.find("\n", fence.end())
        end_match = closing.search(text, line_end + 1) if line_end >= 0 else None
        end = end_match.end() if end_match is not None else len(text)
        regions += _inline_spans(text, pos, fence.start())
        regions.append((fence.start(), end))
        pos = end
    regions += _inline_spans(text, pos, len(text))
    return sorted(regions)


def _inline_spans(text: str, start: int, end: int) -> list[tuple[int, int]]:
    spans = []
    runs = list(_BACKTICKS.finditer(text, start, end))
    i = 0
    while i < len(runs):
        width = len(runs[i].group())
        close = next((j for j in range(i + 1, len(runs)) if len(runs[j].group()) == width), None)
        if close is None:
            i += 1
            continue
        spans.append((runs[i].start(), runs[close].end()))
        i = close + 1
    return spans


def _inside(index: int, regions: list[tuple[int, int]]) -> bool:
    return any(start <= index < end for start, end in regions)


def _outside_code(pattern: re.Pattern[str], text: str) -> str:
    """``text`` with the matches of ``pattern`` outside code removed."""
    if not pattern.search(text):
        return text
    code = code_regions(text)
    return pattern.sub(lambda m: m.group() if _inside(m.start(), code) else "", text)
