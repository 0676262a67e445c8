"""The "Memory Recall" system-prompt section (reference §11), word for word.

The wording is OpenClaw's so that prompts tuned against it keep working; the only addition is the
"+ indexed session transcripts" corpus (OpenClaw's newer wording) when session transcripts are indexed.
Pure string building: the session runner decides the prompt mode and which tools are offered.
"""

from __future__ import annotations

HEADING = "## Memory Recall"

_ASK = "Before answering anything about prior work, decisions, dates, people, preferences, or todos"
_SEARCH_AND_GET = (
    "{ask}: run memory_search on {corpus}; then use memory_get to pull only the needed lines. {low}"
)
_SEARCH_ONLY = "{ask}: run memory_search on {corpus} and answer from the matching results. {low}"
GET_ONLY_LINE = (
    f"{_ASK} that already point to a specific memory file or note: run memory_get to pull only the needed "
    "lines. If low confidence after reading them, say you checked."
)
_LOW_CONFIDENCE = "If low confidence after search, say you checked."

CITATIONS_OFF_LINE = (
    "Citations are disabled: do not mention file paths or line numbers in replies unless the user "
    "explicitly asks."
)
CITATIONS_ON_LINE = "Citations: include Source: <path#line> when it helps the user verify memory snippets."


def memory_recall_section(
    *,
    has_search: bool,
    has_get: bool,
    citations: str,
    include_sessions: bool = False,
    prompt_mode: str = "full",
) -> str:
    """The section text ending in a blank line, or ``""`` when no memory tool is offered.

    Omitted for ``prompt_mode`` "minimal" (subagent and cron sessions) and "none". Any citations mode
    other than "off" (that is "on" and "auto") gets the citations line, as in OpenClaw.
    """
    if prompt_mode in ("minimal", "none") or not (has_search or has_get):
        return ""
    corpus = "MEMORY.md + memory/*.md" + (" + indexed session transcripts" if include_sessions else "")
    if has_search and has_get:
        guidance = _SEARCH_AND_GET.format(ask=_ASK, corpus=corpus, low=_LOW_CONFIDENCE)
    elif has_search:
        guidance = _SEARCH_ONLY.format(ask=_ASK, corpus=corpus, low=_LOW_CONFIDENCE)
    else:
        guidance = GET_ONLY_LINE
    cite = CITATIONS_OFF_LINE if citations == "off" else CITATIONS_ON_LINE
    return "\n".join([HEADING, guidance, cite, ""]) + "\n"
