"""The second stage (``second_stage``): the best keyword hits ordered again by where they hold the
query's words, on small hand-made daily logs searched through the real index (keyword-only), each
mechanism shown against the same search without it."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from sessionmem.config import Config, merge
from sessionmem.memory.search import second_stage
from sessionmem.memory.search.records import SearchRequest, SearchResult
from sessionmem.memory.search.second_stage import (
    COVER_GAIN,
    FOCUS_WEIGHT,
    PROXIMITY_GAIN,
    TRAILING_WEIGHT,
    Hit,
    Place,
    Term,
    Weight,
)
from tests.memory.stores import StoreUnderTest
from tests.memory.support import index_opener, make_config

LOG = "memory/2026-03-02.md"


def config(*, on: bool) -> Config:
    return merge(
        make_config(sources=("memory",)),  # chunks of 60 tokens, 12 of overlap: a few lines each
        {"agents": {"defaults": {"memorySearch": {"query": {"hybrid": {"secondStage": {"enabled": on}}}}}}},
    )


CHAT = [
    "- Ben: Morning! How was the weekend, Anna?",
    "- Anna: Busy. I cleaned the flat and Anna's sister came by with cake.",
    "- Ben: Nice. Did you two do anything else?",
    "- Anna: We walked along the river for hours and talked about work.",
    "- Ben: Sounds lovely. Any other news?",
    "- Ben: Any plans for a pet, by the way?",
    "- Anna: Funny you ask.",
    "- Anna: Guess what I did on Saturday: I went and adopted one!",  # line 8: ends a chunk
    "- Ben: No way! What is it?",
    "- Anna: A small grey cat called Pixel, she sleeps all day.",  # the answer, in the next chunk
    "- Ben: Ha, Pixel is a great name. Send pictures!",
    "- Anna: Will do. She already knocked a glass off the table.",
]
OTHER_DAYS = [
    "the garden needs water",
    "the train was late again",
    "a new recipe for soup",
    "the match on Sunday",
    "tax forms are due",
    "a book about whales",
]


def write_logs(workspace: Path, logs: dict[str, list[str]]) -> None:
    """``logs`` and six short unrelated days (so that a word of one conversation is rare)."""
    (workspace / "memory").mkdir(parents=True, exist_ok=True)
    for i, topic in enumerate(OTHER_DAYS, 1):
        logs = {
            **logs,
            f"memory/2026-04-0{i}.md": [f"- Ben: Today: {topic}.", f"- Carl: Right, {topic}, noted."],
        }
    for path, lines in logs.items():
        (workspace / path).write_text("\n".join(lines) + "\n")


@pytest.fixture
def searches(
    tmp_path: Path, state: Path, index_store: StoreUnderTest
) -> Iterator[Callable[[dict[str, list[str]], str], dict[bool, list]]]:
    """``search(logs, query)``: the query's results on those logs, second stage off and on (each store:
    PostgreSQL holds FTS5's tokens too, so the same lines are read the same way)."""
    workspace = tmp_path / "ws"
    with index_opener(workspace, state, index_store) as open_index:

        def _search(logs: dict[str, list[str]], query: str) -> dict[bool, list[SearchResult]]:
            write_logs(workspace, logs)
            out = {}
            for on in (False, True):
                index = open_index(config(on=on))
                index.sync()
                out[on] = list(index.search(SearchRequest(query, explain=True)).results)
                index.close()
            return out

        yield _search


@pytest.fixture
def without_c(monkeypatch: pytest.MonkeyPatch) -> None:
    """(a) and (b) alone: (c)'s weights off (each mechanism is shown on its own)."""
    monkeypatch.setattr(second_stage, "COVER_GAIN", 0.0)
    monkeypatch.setattr(second_stage, "FOCUS_WEIGHT", 0.0)


def spans(results: list[SearchResult]) -> list[tuple[str, int, int]]:
    return [(r.path, r.start_line, r.end_line) for r in results]


def test_the_chunk_that_continues_where_the_question_was_asked_comes_first(
    searches: Any, without_c: None
) -> None:
    got = searches({LOG: CHAT}, "What did Anna adopt?")
    asked, answered = (LOG, 4, 8), (LOG, 8, 11)  # the chunk ending on the question, the one after
    assert spans(got[False])[:2] == [asked, answered]  # BM25 alone: the question's chunk first
    assert spans(got[True])[:2] == [answered, asked]  # it ends on its best line; the next one goes on
    before, after = ({spans([r])[0]: r for r in got[on]} for on in (False, True))
    assert after[answered].score == before[answered].score  # the continuing chunk keeps its score
    assert after[asked].score < before[asked].score
    explained = after[asked].explanation
    assert explained is not None and explained.trailing == TRAILING_WEIGHT  # what --explain shows


def test_the_query_words_side_by_side_come_before_the_same_words_apart(
    searches: Any, without_c: None
) -> None:
    together = "memory/2026-05-01.md"
    apart = "memory/2026-05-02.md"
    logs = {
        together: [
            "- Anna: We had dinner at the harbour restaurant with Ben and his two cousins from Leeds."
        ],
        apart: ["- Anna: The harbour was busy with boats; later Ben found a restaurant."],
    }
    got = searches(logs, "Which harbour restaurant was it?")
    assert [r.path for r in got[False]] == [apart, together]  # shorter: BM25 puts it first
    assert [r.path for r in got[True]] == [together, apart]
    assert got[True][1].score == got[False][0].score  # words apart: unchanged
    lifted = got[True][0].explanation
    assert lifted is not None and lifted.proximity == pytest.approx(1 + PROXIMITY_GAIN)  # one pair, together


# ---------------------------------------------------------------------------- the pure weights

ANNA = Term(("anna",), 2.0)
ADOPT = Term(("adopt",), 3.0)


def hit(key: int, start: int, lines: list[str]) -> Hit:
    return Hit(key, LOG, start, start + len(lines) - 1, [dict(enumerate(line.split())) for line in lines])


def test_a_hit_ending_on_its_best_line_gives_way_to_the_hit_that_continues_it(without_c: None) -> None:
    ends = hit(1, 1, ["ben hello", "anna how are you", "anna guess what i did today i adopt"])
    after = Place(2, LOG, 3, 5)  # holds line 3 and the answer after it
    elsewhere = Place(3, "memory/2026-03-09.md", 3, 5)  # another file continues nothing
    assert second_stage.weights([ends], [after], [ANNA, ADOPT])[1] == Weight(evidence=TRAILING_WEIGHT)
    assert second_stage.weights([ends], [elsewhere], [ANNA, ADOPT])[1] == Weight()
    # the best line elsewhere in the hit, or a hit that is its own continuation: no weight
    middle = hit(1, 1, ["ben hello", "anna guess what i did today i adopt", "anna bye"])
    assert second_stage.weights([middle], [Place(2, LOG, 3, 5)], [ANNA, ADOPT])[1] == Weight()
    assert second_stage.weights([ends], [Place(1, LOG, 1, 3)], [ANNA, ADOPT])[1] == Weight()


def test_query_terms_standing_together_lift_a_hit_by_their_idf_share(without_c: None) -> None:
    harbour, restaurant, dinner = Term(("harbour",), 1.0), Term(("restaur",), 1.0), Term(("dinner",), 2.0)
    together = hit(1, 1, ["we ate at the harbour restaur on friday"])
    apart = hit(2, 1, ["the harbour was calm and the sun set over the whole restaur"])
    other_lines = hit(3, 1, ["the harbour", "restaur"])
    got = second_stage.weights([together, apart, other_lines], [], [harbour, restaurant])
    assert got[1].rank == pytest.approx(1 + PROXIMITY_GAIN) and got[1].evidence == 1.0
    assert got[2] == got[3] == Weight()
    # three terms: two pairs weighed by their IDFs, (harbour, restaurant) 2 of 2 + 3 = 5
    got = second_stage.weights([together], [], [harbour, restaurant, dinner])
    assert got[1].rank == pytest.approx(1 + PROXIMITY_GAIN * 2 / 5)
    # a phrase of two tokens stands where its tokens stand side by side
    phrase = Term(("bill", "4821"), 4.0)
    paid = hit(4, 1, ["paid bill 4821 today", "bill paid 4821"])
    assert second_stage.weights([paid], [], [Term(("paid",), 1.0), phrase])[4].rank == pytest.approx(
        1 + PROXIMITY_GAIN
    )


def test_a_hit_holding_the_query_in_a_few_lines_comes_before_one_gathering_it_from_all_over(
    searches: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    together = "memory/2026-05-03.md"
    scattered = "memory/2026-05-04.md"
    logs = {
        together: [
            "- Ben: How was the market this morning?",
            "- Anna: Crowded. I went there to buy a blue bicycle for my son, second hand.",
            "- Ben: Did he like it?",
            "- Anna: He rode it all afternoon.",
        ],
        scattered: [
            "- Anna: I need to buy paint for the kitchen, and buy brushes.",
            "- Ben: Which colour?",
            "- Anna: Not sure yet.",
            "- Ben: The bicycle shop sells paint too, bicycle paint.",
            "- Anna: Good idea.",
            "- Ben: Mine was red.",
            "- Anna: Then blue, I think.",
        ],
    }
    with monkeypatch.context() as off:
        off.setattr(second_stage, "COVER_GAIN", 0.0)
        off.setattr(second_stage, "FOCUS_WEIGHT", 0.0)
        before = searches(logs, "Where did Anna buy the blue bicycle?")[True]
    after = searches(logs, "Where did Anna buy the blue bicycle?")[True]
    assert [r.path for r in before] == [scattered, together]  # more of the words, more often: BM25 first
    assert [r.path for r in after] == [together, scattered]
    apart, near = after[1].explanation, after[0].explanation
    assert apart is not None and apart.trailing < 1.0  # its words lie further apart than 3 lines
    assert near is not None and near.trailing == 1.0 and near.proximity > apart.proximity


def test_the_best_window_of_lines_weighs_rank_and_evidence_by_what_it_holds() -> None:
    buy, blue, bicycle = Term(("buy",), 1.0), Term(("blue",), 2.0), Term(("bicycl",), 2.0)
    query = [buy, blue, bicycle]
    near = hit(1, 1, ["hello", "i buy a blue bicycl", "ok"])  # every term in one window of 3 lines
    apart = hit(2, 1, ["i buy paint", "hm", "ok", "a bicycl shop", "fine", "red", "then blue"])
    got = second_stage.weights([near, apart], [], query)
    # near: rank x (1 + (b) 2 pairs of 2, of weights 3 + 4, together) x (1 + cover 5 / 5), evidence x 1
    assert got[1].rank == pytest.approx((1 + PROXIMITY_GAIN) * (1 + COVER_GAIN))
    assert got[1].evidence == 1.0
    # apart: its best 3 lines hold bicycle alone (2 of the 5 it holds)
    assert got[2].rank == pytest.approx(1 + COVER_GAIN * 2 / 5)
    assert got[2].evidence == pytest.approx(1 - FOCUS_WEIGHT + FOCUS_WEIGHT * 2 / 5)
