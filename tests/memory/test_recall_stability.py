"""Two things a user checks of memory search with the real MiniLM model (issue 19, points 3 and 4):
a new user's first few notes are found by meaning with the defaults, and asking for more results
never loses what fewer found."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from sessionmem.config import MemorySearchConfig
from sessionmem.memory.index import MemoryIndex
from sessionmem.memory.search.records import SearchRequest

# A new user's workspace: four short notes, the retro's new time in one of them.
FIRST_NOTES = {
    "MEMORY.md": "# Memory\n\n- I work on the billing team; my manager is Peter.\n- Prefer short answers.\n",
    "memory/2026-11-18.md": "# 2026-11-18\n\n- Deployed the invoice exporter to staging; two flaky tests"
    " left.\n",
    "memory/2026-11-19.md": "# 2026-11-19\n\n- Lunch with Aiko: she recommends the ramen place near the"
    " station.\n",
    "memory/2026-11-20.md": "# 2026-11-20\n\n- Peter asked to move the retro to Thursday 15:00.\n",
}
NEVER_WRITTEN = (
    "what is the wifi password at the ski chalet",
    "Which airline lost my suitcase on the flight to Toronto?",
    "How much did the plumber charge for fixing the boiler?",
    "When does the passport renewal appointment take place?",
)

PEOPLE = ("Ana", "Bruno", "Chen", "Dana", "Emil", "Farah", "Goran", "Hana")
DOINGS = (
    "met {p} for coffee and talked about the {t} plan",
    "{p} asked for help with the {t} budget before the meeting",
    "reviewed the {t} draft that {p} wrote; two open questions",
    "{p} will be away next week, so the {t} review moves to Monday",
    "called {p} about the {t} invoice; it is paid now",
    "{p} shared photos from the hiking trip and a note on the {t} schedule",
)
TOPICS = ("garden", "kitchen", "conference", "school", "moving", "holiday", "car", "website")
QUESTIONS = (
    "when is the meeting about the budget",
    "who went hiking",
    "what did Dana say about the conference",
    "which invoice was paid",
    "who is away next week",
)


def write(workspace: Path, notes: dict[str, str]) -> Path:
    for rel, text in notes.items():
        path = workspace / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return workspace


def daily_logs(days: int = 90) -> dict[str, str]:
    """A few months of daily logs: the same people, words and topics again and again, so each
    question matches far more chunks than six results' candidate pool used to hold."""
    notes = {}
    for day in range(days):
        lines = [
            DOINGS[(day + k) % len(DOINGS)].format(
                p=PEOPLE[(day * 3 + k) % len(PEOPLE)], t=TOPICS[(day * 5 + k * 7) % len(TOPICS)]
            )
            for k in range(3)
        ]
        name = f"2026-{1 + day // 28:02d}-{1 + day % 28:02d}"
        notes[f"memory/{name}.md"] = f"# {name}\n\n" + "".join(f"- {line}\n" for line in lines)
    return notes


def open_index(workspace: Path, state: Path, settings: MemorySearchConfig) -> MemoryIndex:
    index = MemoryIndex.open("main", workspace, settings, state_dir=state, watch=False)
    index.sync()
    return index


def local(model: Path) -> MemorySearchConfig:
    """The product defaults, with the local model."""
    return MemorySearchConfig.model_validate({"provider": "local", "local": {"modelPath": str(model)}})


@pytest.fixture(scope="module")
def first_notes(tmp_path_factory: pytest.TempPathFactory, gguf_model: Path) -> Iterator[MemoryIndex]:
    root = tmp_path_factory.mktemp("first-notes")
    index = open_index(write(root / "workspace", FIRST_NOTES), root / "state", local(gguf_model))
    try:
        yield index
    finally:
        index.close()


@pytest.mark.local_model
def test_a_new_user_s_paraphrase_is_found_in_four_notes_with_the_defaults(first_notes: MemoryIndex) -> None:
    response = first_notes.search(SearchRequest("When is the retrospective meeting?", explain=True))
    assert response.results, f"nothing found; held back: {response.held_back}"
    hit = response.results[0]
    assert hit.path == "memory/2026-11-20.md" and "Thursday 15:00" in hit.snippet
    assert hit.explanation is not None and hit.explanation.text_score is None  # found by meaning alone
    cal = response.calibration
    assert cal is not None and cal["vectors"] == 4 and cal["reference_notes"] > 0


@pytest.mark.local_model
@pytest.mark.parametrize("question", NEVER_WRITTEN)
def test_questions_about_what_four_notes_never_say_get_nothing(
    first_notes: MemoryIndex, question: str
) -> None:
    response = first_notes.search(SearchRequest(question))
    assert response.results == (), [r.snippet for r in response.results]
    assert response.held_back is not None  # ... and it says what it held back


@pytest.fixture(scope="module", params=["keyword", "hybrid"])
def months_of_logs(
    tmp_path_factory: pytest.TempPathFactory, gguf_model: Path, request: pytest.FixtureRequest
) -> Iterator[MemoryIndex]:
    root = tmp_path_factory.mktemp(f"logs-{request.param}")
    settings = local(gguf_model) if request.param == "hybrid" else MemorySearchConfig(provider="none")
    index = open_index(write(root / "workspace", daily_logs()), root / "state", settings)
    try:
        yield index
    finally:
        index.close()


@pytest.mark.local_model
@pytest.mark.parametrize("question", QUESTIONS)
def test_asking_for_more_results_never_loses_what_fewer_found(
    months_of_logs: MemoryIndex, question: str
) -> None:
    def ask(n: int) -> list[tuple[str, int, float]]:
        response = months_of_logs.search(SearchRequest(question, max_results=n, min_score=0.0))
        return [(r.path, r.start_line, r.score) for r in response.results]

    six, ten, thirty = ask(6), ask(10), ask(30)
    assert len(six) == 6 and len(ten) == 10 and len(thirty) == 30  # the workspace holds more
    assert ten[:6] == six
    assert thirty[:10] == ten
