"""The Memory Recall system-prompt section, checked word for word against reference §11."""

from __future__ import annotations

import pytest

from sessionmem.memory.tools.recall_prompt import memory_recall_section

BOTH = (
    "Before answering anything about prior work, decisions, dates, people, preferences, or todos: "
    "run memory_search on MEMORY.md + memory/*.md; then use memory_get to pull only the needed lines. "
    "If low confidence after search, say you checked."
)
SEARCH_ONLY = (
    "Before answering anything about prior work, decisions, dates, people, preferences, or todos: "
    "run memory_search on MEMORY.md + memory/*.md and answer from the matching results. "
    "If low confidence after search, say you checked."
)
GET_ONLY = (
    "Before answering anything about prior work, decisions, dates, people, preferences, or todos "
    "that already point to a specific memory file or note: run memory_get to pull only the needed lines. "
    "If low confidence after reading them, say you checked."
)
CITE_ON = "Citations: include Source: <path#line> when it helps the user verify memory snippets."
CITE_OFF = (
    "Citations are disabled: do not mention file paths or line numbers in replies unless the user "
    "explicitly asks."
)


@pytest.mark.parametrize(
    ("has_search", "has_get", "citations", "guidance", "cite"),
    [
        (True, True, "auto", BOTH, CITE_ON),
        (True, True, "on", BOTH, CITE_ON),
        (True, True, "off", BOTH, CITE_OFF),
        (True, False, "auto", SEARCH_ONLY, CITE_ON),
        (True, False, "off", SEARCH_ONLY, CITE_OFF),
        (False, True, "on", GET_ONLY, CITE_ON),
        (False, True, "off", GET_ONLY, CITE_OFF),
    ],
)
def test_section_text_per_tool_set_and_citations_mode(
    has_search: bool, has_get: bool, citations: str, guidance: str, cite: str
) -> None:
    text = memory_recall_section(has_search=has_search, has_get=has_get, citations=citations)
    assert text == f"## Memory Recall\n{guidance}\n{cite}\n\n"


def test_session_transcripts_join_the_search_corpus() -> None:
    both = memory_recall_section(has_search=True, has_get=True, citations="on", include_sessions=True)
    assert both.splitlines()[1] == BOTH.replace(
        "MEMORY.md + memory/*.md;", "MEMORY.md + memory/*.md + indexed session transcripts;"
    )
    search = memory_recall_section(has_search=True, has_get=False, citations="on", include_sessions=True)
    assert search.splitlines()[1] == SEARCH_ONLY.replace(
        "MEMORY.md + memory/*.md and", "MEMORY.md + memory/*.md + indexed session transcripts and"
    )
    get_only = memory_recall_section(has_search=False, has_get=True, citations="on", include_sessions=True)
    assert get_only.splitlines()[1] == GET_ONLY


def test_no_tools_means_no_section() -> None:
    assert memory_recall_section(has_search=False, has_get=False, citations="on") == ""


@pytest.mark.parametrize("mode", ["minimal", "none"])
def test_minimal_and_none_prompt_modes_omit_the_section(mode: str) -> None:
    assert memory_recall_section(has_search=True, has_get=True, citations="on", prompt_mode=mode) == ""


def test_section_ends_with_a_blank_line_before_the_next_section() -> None:
    prompt = (
        "## Tooling\nx\n\n"
        + memory_recall_section(has_search=True, has_get=True, citations="off")
        + "## Next"
    )
    assert f"{CITE_OFF}\n\n## Next" in prompt
