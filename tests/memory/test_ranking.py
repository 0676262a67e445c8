"""Pure scoring: calibrated keyword evidence, hybrid merge (DESIGN 15), decay (DESIGN 13), filters, MMR."""

from __future__ import annotations

import math
import random
import re
from datetime import UTC, date, datetime

import pytest

from sessionmem.memory.search import ranking
from sessionmem.memory.search.ranking import Candidate
from sessionmem.memory.store.fts_view import bm25_idf, fts_text

NOW = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)


def cand(cid: str, **kw: object) -> Candidate:
    base: dict[str, object] = {
        "id": cid,
        "path": f"memory/{cid}.md",
        "source": "memory",
        "start_line": 1,
        "end_line": 2,
        "text": cid,
    }
    base.update(kw)
    return Candidate(**base)  # type: ignore[arg-type]


# ---------------------------------------------------------------------------- keyword evidence


def test_idf_is_fts5s_and_floored() -> None:
    assert bm25_idf(100, 1) == pytest.approx(math.log(99.5 / 1.5))
    assert bm25_idf(100, 0) > bm25_idf(100, 1)  # a term no chunk holds is the rarest
    assert bm25_idf(10, 8) == pytest.approx(1e-6)  # in most chunks: no evidence, as in FTS5


def test_keyword_score_is_the_share_of_the_query_matched_whatever_the_corpus_size() -> None:
    # bm25() of a chunk holding the query once, at average length, equals the query's ideal: 0.63
    for ideal in (0.5, 4.0, 40.0):  # a tiny corpus and a large one give the same score
        assert ranking.keyword_score(-ideal, ideal, 1.0) == pytest.approx(1 - math.exp(-1.0))
    half = ranking.keyword_score(-2.0, 4.0, 1.0)
    assert 0.35 < half < 0.4  # half of the query's weight matched: just passes the default floor alone
    assert ranking.keyword_score(-0.2, 4.0, 1.0) < 0.1  # only its common words
    assert ranking.keyword_score(-40.0, 4.0, 1.0) < 1.0  # saturates, never past 1
    assert ranking.keyword_score(0.0, 4.0, 1.0) == 0.0
    assert ranking.keyword_score(float("nan"), 4.0, 1.0) == 0.0


def test_exact_wording_counts_between_half_and_all() -> None:
    as_written = ranking.keyword_score(-3.0, 3.0, 1.0)
    stems_only = ranking.keyword_score(-3.0, 3.0, 0.0)
    assert stems_only == pytest.approx(as_written / 2)


def test_coverage_counts_whole_words_as_written() -> None:
    terms = ranking.coverage_terms(["billing", "cutover", "zebra"])
    assert ranking.term_coverage(terms, "the billing cutover is on tuesday") == pytest.approx(2 / 3)
    assert ranking.term_coverage(terms, "cutovers and billings") == 0.0  # whole words only
    cjk = ranking.coverage_terms(["周  会"])
    assert ranking.term_coverage(cjk, fts_text("与上海团队的周会改到每周四")) == 1.0
    assert (
        ranking.term_coverage(ranking.coverage_terms(["bill-4821"]), fts_text("Paid BILL-4821 today")) == 1.0
    )


def test_a_word_is_held_exactly_when_it_is_one_of_the_texts_words() -> None:
    """A one-word term counts when it is one of the text's ``\\w+`` words, and only then: inside a longer
    word (letters, digits, ``_``, accented or CJK characters on either side) it does not."""
    rng = random.Random(4)
    alphabet = ["ab", "b", "a", "_", "9", "é", "É", "周", " ", "-", ".", "\n", "ß"]
    terms = ["ab", "a", "b", "ab_9", "é", "周", "ss", "9"]
    for _ in range(2000):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 12)))
        words = set(re.findall(r"\w+", text.casefold()))
        for term in terms:
            expected = 1.0 if term.casefold() in words else 0.0
            assert ranking.term_coverage(ranking.coverage_terms([term]), text) == expected, (term, text)


# ---------------------------------------------------------------------------- merge


def test_combine_lets_either_strong_side_pass_and_agreement_lift() -> None:
    both = ranking.combine(0.5, 0.5, vector_weight=0.5, text_weight=0.5)
    assert both == pytest.approx(0.75)
    assert ranking.combine(0.6, None, vector_weight=0.5, text_weight=0.5) == pytest.approx(0.6)
    assert ranking.combine(None, 0.6, vector_weight=0.5, text_weight=0.5) == pytest.approx(0.6)
    weak = ranking.combine(0.15, 0.15, vector_weight=0.5, text_weight=0.5)
    assert weak < 0.35 < ranking.combine(0.4, None, vector_weight=0.5, text_weight=0.5)


def test_combine_weights_are_relative_and_zero_ignores_a_side() -> None:
    assert ranking.combine(0.9, 0.3, vector_weight=1.0, text_weight=0.0) == pytest.approx(0.3)
    assert ranking.combine(0.9, 0.3, vector_weight=0.0, text_weight=1.0) == pytest.approx(0.9)
    keyword_light = ranking.combine(0.8, None, vector_weight=0.7, text_weight=0.3)
    assert keyword_light == pytest.approx(1 - 0.2 ** (0.3 / 0.7))
    assert ranking.combine(None, None, vector_weight=0.5, text_weight=0.5) == 0.0


# ---------------------------------------------------------------------------- decay


def test_decay_curve_is_openclaws() -> None:
    assert ranking.decay_curve(30, 30) == pytest.approx(0.5)
    assert ranking.decay_curve(10, 30) == pytest.approx(math.exp(-math.log(2) / 30 * 10))
    assert ranking.decay_curve(-5, 30) == 1.0  # future dates do not decay
    assert ranking.decay_curve(26 * 365, 30) < 0.001


def test_multiplier_is_floored_so_age_never_erases_a_note() -> None:
    ancient = ranking.decay_multiplier(date(2000, 1, 1), NOW, 30)
    assert ancient == pytest.approx(ranking.DECAY_FLOOR, abs=1e-6)
    assert ranking.decay_multiplier(date(2026, 5, 2), NOW, 30) == pytest.approx(
        ranking.DECAY_FLOOR + (1 - ranking.DECAY_FLOOR) * ranking.decay_curve(30.5, 30)
    )
    assert ranking.decay_multiplier(None, NOW, 30) == 1.0


@pytest.mark.parametrize(
    ("path", "source", "chunk_date", "expected"),
    [
        ("memory/2026-05-01.md", "memory", None, date(2026, 5, 1)),
        ("notes/memory/2026-05-01.md", "memory", None, date(2026, 5, 1)),
        ("memory/2026-02-30.md", "memory", None, None),  # not a calendar date
        ("MEMORY.md", "memory", "2026-05-01", None),
        ("memory.md", "memory", "2026-05-01", None),
        ("memory/projects.md", "memory", "2026-05-01", None),
        ("memory/2026-01-01-slug.md", "memory", "2026-01-01", None),  # hook output is evergreen
        ("sessions/abc.jsonl", "sessions", "2025-12-24", date(2025, 12, 24)),
        ("docs/extra.md", "memory", "2025-03-03", date(2025, 3, 3)),
        ("docs/extra.md", "memory", None, None),
    ],
)
def test_decay_date(path: str, source: str, chunk_date: str | None, expected: date | None) -> None:
    assert ranking.decay_date(path, source, chunk_date) == expected


def test_decay_orders_close_matches_by_recency() -> None:
    new = cand("new", path="memory/2026-05-31.md", merged=0.8)
    old = cand("old", path="memory/2025-01-01.md", merged=0.95)
    ranked = ranking.sort_by_score(ranking.apply_decay([old, new], now=NOW, half_life_days=30))
    assert [c.id for c in ranked] == ["new", "old"]


def test_old_good_match_outranks_new_poor_match() -> None:
    """DESIGN decision 13: decay reorders near-ties, it never buries a clearly better note."""
    old_good = cand("old", path="memory/2021-03-01.md", merged=0.82)
    new_poor = cand("new", path="memory/2026-06-01.md", merged=0.38)
    ranked = ranking.sort_by_score(ranking.apply_decay([new_poor, old_good], now=NOW, half_life_days=30))
    assert [c.id for c in ranked] == ["old", "new"]
    assert ranked[0].final == pytest.approx(0.82 * ranking.DECAY_FLOOR, rel=1e-3)


# ---------------------------------------------------------------------------- filters


def test_floor_keeps_what_passes_and_returns_what_it_held_back() -> None:
    cands = [cand("a", merged=0.5), cand("b", merged=0.2), cand("c", merged=0.35), cand("d", merged=0.1)]
    kept, held = ranking.apply_floor(cands, min_score=0.35)
    assert [c.id for c in kept] == ["a", "c"]
    assert [c.id for c in held] == ["b", "d"]
    assert ranking.apply_floor([], min_score=0.35) == ([], [])


def test_date_range_inclusive_and_undated_excluded() -> None:
    after, before = date(2026, 1, 1), date(2026, 1, 31)
    assert ranking.in_date_range("2026-01-01", after, before)
    assert ranking.in_date_range("2026-01-31", after, before)
    assert not ranking.in_date_range("2025-12-31", after, before)
    assert not ranking.in_date_range("2026-02-01", None, before)
    assert ranking.in_date_range("2026-02-01", after, None)
    assert not ranking.in_date_range(None, after, None)
    assert ranking.in_date_range(None, None, None)
    assert ranking.in_date_range("2020-01-01", None, before)


def test_snippet_cut_at_700_code_points() -> None:
    text = "😀" * 699 + "ab"
    out = ranking.snippet(text)
    assert len(out) == 700 and out.endswith("😀a")
    assert out.encode("utf-8").decode("utf-8") == out


# ---------------------------------------------------------------------------- MMR


def test_jaccard_edges() -> None:
    a, b = frozenset({"x", "y"}), frozenset({"y", "z"})
    assert ranking.jaccard(frozenset(), frozenset()) == 1.0
    assert ranking.jaccard(a, frozenset()) == 0.0
    assert ranking.jaccard(a, b) == ranking.jaccard(b, a) == pytest.approx(1 / 3)


def test_mmr_tokens_see_cjk_text() -> None:
    t1 = ranking.mmr_tokens("数据库迁移计划在周五")
    t2 = ranking.mmr_tokens("团队午餐改到周三")
    assert t1 and t2 and ranking.jaccard(t1, t2) < 0.2
    assert "数据" in t1 and "deploy" in ranking.mmr_tokens("Deploy 数据")


def test_mmr_promotes_diverse_item_over_near_duplicate() -> None:
    cands = [
        cand("a", text="billing cutover happens on march third for all accounts", merged=0.90),
        cand("a2", text="billing cutover happens on march third for every account", merged=0.88),
        cand("b", text="the office moves to the new building in april", merged=0.80),
        cand("z", text="lunch menu", merged=0.30),
    ]
    assert [c.id for c in ranking.mmr_rerank(cands, lambda_=1.0)] == ["a", "a2", "b", "z"]
    out = ranking.mmr_rerank(cands, lambda_=0.7)
    assert [c.id for c in out] == ["a", "b", "a2", "z"]
    assert [c.mmr_rank for c in out] == [0, 1, 2, 3]
    assert [c.final for c in out] == [0.90, 0.80, 0.88, 0.30]  # scores untouched


def test_mmr_works_on_cjk_snippets() -> None:
    cands = [
        cand("a", text="数据库迁移计划定在三月三日", merged=0.90),
        cand("a2", text="数据库迁移计划定在三月三号", merged=0.88),
        cand("b", text="团队午餐改到下周三中午", merged=0.80),
        cand("z", text="周报", merged=0.30),
    ]
    assert [c.id for c in ranking.mmr_rerank(cands, lambda_=0.7)] == ["a", "b", "a2", "z"]


def test_mmr_tokens_see_thai_text() -> None:
    # Thai has no spaces and its vowel and tone marks are not \w: "rice" and "news" differ by one tone mark.
    rice, news = ranking.mmr_tokens("ข้าวใหม่"), ranking.mmr_tokens("ข่าวใหม่")
    assert ranking.jaccard(rice, news) < 1
    assert ranking.jaccard(rice, ranking.mmr_tokens("ข้าวใหม่")) == 1
    t1 = ranking.mmr_tokens("กำหนดการย้ายฐานข้อมูลคือวันที่สามมีนาคม")
    t2 = ranking.mmr_tokens("ทีมกินข้าวกลางวันวันพุธหน้า")
    assert t1 and t2 and ranking.jaccard(t1, t2) < 0.2
    assert "ข้อมูล" not in t1 and "ข้อ" in t1 and "มูล" in t1  # pairs of clusters, marks kept
    assert {"deploy", "ข้อ"} <= ranking.mmr_tokens("Deploy ข้อมูล")


def test_mmr_works_on_thai_snippets() -> None:
    cands = [
        cand("a", text="กำหนดการย้ายฐานข้อมูลคือวันที่สามมีนาคม", merged=0.90),
        cand("a2", text="กำหนดการย้ายฐานข้อมูลคือวันที่สามเมษายน", merged=0.88),
        cand("b", text="ทีมกินข้าวกลางวันวันพุธหน้า", merged=0.80),
        cand("z", text="รายงาน", merged=0.30),
    ]
    assert [c.id for c in ranking.mmr_rerank(cands, lambda_=0.7)] == ["a", "b", "a2", "z"]


def _mmr_reference(cands: list[ranking.Candidate], lam: float, limit: int) -> list[str]:
    """MMR comparing every candidate at every pick (what ``mmr_rerank`` must equal)."""
    ordered = ranking.sort_by_score(cands)
    scores = [c.final for c in ordered]
    lo, hi = min(scores), max(scores)
    rel = [1.0 if hi == lo else (s - lo) / (hi - lo) for s in scores]
    toks = [ranking.mmr_tokens(c.text) for c in ordered]
    picks: list[int] = []
    rest = list(range(len(ordered)))
    while rest and len(picks) < limit:

        def value(i: int) -> tuple[float, float, int]:
            sim = max((ranking.jaccard(toks[i], toks[p]) for p in picks), default=0.0)
            return (lam * rel[i] - (1 - lam) * sim, scores[i], -i)

        best = max(rest, key=value)
        picks.append(best)
        rest.remove(best)
    return [ordered[i].id for i in picks + rest]


def test_mmr_reads_only_what_could_win_and_orders_as_comparing_all() -> None:
    rng = random.Random(7)
    words = ["billing", "cutover", "march", "third", "office", "moves", "april", "lunch", "menu", "deploy"]
    for trial in range(200):
        n = rng.randint(1, 25)
        cands = [
            cand(
                f"c{i}",
                text=" ".join(rng.choices(words, k=rng.randint(1, 8))),
                merged=round(rng.choice([rng.random(), 0.5]), 2),  # ties too
            )
            for i in range(n)
        ]
        lam, limit = rng.choice([0.0, 0.3, 0.5, 0.7, 0.9]), rng.randint(1, 12)
        got = [c.id for c in ranking.mmr_rerank(cands, lambda_=lam, limit=limit)]
        assert got == _mmr_reference(cands, lam, limit), (trial, lam, limit)


def test_mmr_lambda_one_is_plain_sort_and_keeps_all() -> None:
    cands = [cand("x", merged=0.2), cand("y", merged=0.9), cand("z", merged=0.5)]
    assert [c.id for c in ranking.mmr_rerank(cands, lambda_=1.0)] == ["y", "z", "x"]
    assert len(ranking.mmr_rerank(cands, lambda_=0.0)) == 3
    assert ranking.mmr_rerank([], lambda_=0.7) == []


def test_mmr_ties_go_to_higher_original_score() -> None:
    cands = [cand("lo", text="same words", merged=0.5), cand("hi", text="same words", merged=0.6)]
    assert [c.id for c in ranking.mmr_rerank(cands, lambda_=0.5)] == ["hi", "lo"]
