"""Searcher end to end on a real SQLite index (FTS5 + sqlite-vec), built row by row here."""

from __future__ import annotations

import hashlib
import math
from collections.abc import Sequence
from datetime import date
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from freezegun import freeze_time

from sessionmem.config import MemorySearchConfig
from sessionmem.memory.search import ranking
from sessionmem.memory.search.calibration import CALIBRATION_KEY, Calibration
from sessionmem.memory.search.ranking import DECAY_FLOOR
from sessionmem.memory.search.records import SearchRequest
from sessionmem.memory.search.searcher import Searcher, candidate_count
from sessionmem.memory.store import schema
from sessionmem.memory.store.database import VectorSupport, connect
from sessionmem.memory.store.fts_view import fts_text
from sessionmem.memory.store.meta import write_json
from tests.memory.support import index_opener, make_config

DIMS = 8

# ---------------------------------------------------------------------------- index helpers


def make_db(
    tmp_path: Path, *, dims: int | None = DIMS, tokenizer: str = "porter"
) -> tuple[Any, VectorSupport]:
    """A fresh index file with the real schema; the vec0 table when sqlite-vec loaded."""
    conn, support = connect(tmp_path / "index.sqlite")
    conn.executescript(schema.TABLES)
    conn.executescript(schema.fts_table_sql(tokenizer))
    if dims is not None and support.loaded:
        conn.execute(schema.vec_table_sql(dims))
    return conn, support


def unit(vec: Sequence[float] | np.ndarray) -> np.ndarray:
    arr = np.asarray(vec, dtype=np.float32)
    return arr / np.linalg.norm(arr)


def add_chunk(
    conn: Any,
    path: str,
    text: str,
    *,
    source: str = "memory",
    model: str = "fts-only",
    embedding: Sequence[float] | np.ndarray | None = None,
    day: str | None = None,
    start_line: int = 1,
) -> str:
    """Insert one chunk the way the index does: chunks, chunks_fts (same rowid), chunks_vec."""
    end_line = start_line + text.count("\n")
    text_hash = hashlib.sha256(text.encode()).hexdigest()
    cid = hashlib.sha256(f"{source}:{path}:{start_line}:{end_line}:{text_hash}:{model}".encode()).hexdigest()
    blob = unit(embedding).astype("<f4").tobytes() if embedding is not None else None
    cur = conn.execute(
        "INSERT INTO chunks(id, path, source, start_line, end_line, hash, model, text, embedding, date,"
        " updated_at) VALUES (?,?,?,?,?,?,?,?,?,?,0)",
        (cid, path, source, start_line, end_line, text_hash, model, text, blob, day),
    )
    conn.execute(
        "INSERT INTO chunks_fts(rowid, text, id, path, source, model, start_line, end_line)"
        " VALUES (?,?,?,?,?,?,?,?)",
        (cur.lastrowid, fts_text(text), cid, path, source, model, start_line, end_line),
    )
    has_vec = conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'chunks_vec'").fetchone()
    if blob is not None and has_vec:
        conn.execute("INSERT INTO chunks_vec(id, embedding) VALUES (?, ?)", (cid, blob))
    return cid


class FixedEmbedder:
    """Embedder protocol stub for merge arithmetic: each query maps to a vector the test chose."""

    provider = "test"
    model = "fixed-test"
    provider_key = "fixed-test"
    max_input_tokens = 512

    def __init__(self, vectors: dict[str, Sequence[float]]) -> None:
        self._vectors = vectors

    @property
    def dims(self) -> int:
        return DIMS

    def embed_query(self, text: str) -> np.ndarray:
        return np.asarray(self._vectors.get(text, [0.0] * DIMS), dtype=np.float32)

    def embed_documents(self, texts: Sequence[str], progress: Any = None) -> np.ndarray:
        return np.stack([self.embed_query(t) for t in texts])


def axis(i: int, noise: float = 0.0, j: int = 7) -> list[float]:
    v = [0.0] * DIMS
    v[i] = 1.0
    v[j] += noise
    return v


def add_filler(conn: Any, n: int = 30, *, model: str = "fts-only") -> None:
    """Unrelated notes, so BM25's IDF sees a realistic corpus (a word in most of 3 notes scores ~0)."""
    for i in range(n):
        emb = axis(5) if model != "fts-only" else None
        add_chunk(
            conn,
            f"memory/filler/{i}.md",
            f"routine note number {i} about weather",
            model=model,
            embedding=emb,
        )


def cfg(**query: Any) -> MemorySearchConfig:
    return MemorySearchConfig.model_validate({"sources": ["memory", "sessions"], "query": query})


def paths(resp: Any) -> list[str]:
    return [r.path for r in resp.results]


# ---------------------------------------------------------------------------- FTS-only


@pytest.fixture
def notes(tmp_path: Path) -> tuple[Any, VectorSupport]:
    conn, support = make_db(tmp_path)
    add_chunk(
        conn, "memory/2026-03-02.md", "Billing cutover to the new invoicing system is set for March 14."
    )
    add_chunk(conn, "memory/2026-03-03.md", "Lunch with the design team; we talked about onboarding screens.")
    add_chunk(conn, "MEMORY.md", "Alice prefers short status updates. The staging cluster is in Frankfurt.")
    add_chunk(conn, "memory/zh.md", "我们决定把数据库迁移到新的服务器，金银价格每天更新。")
    add_chunk(conn, "memory/ja.md", "会議の議事録はチームのドライブに保存しました。")
    add_chunk(conn, "memory/ko.md", "어제 배포 후 서버 에러가 발생해서 롤백했습니다.")
    add_chunk(conn, "memory/model-b.md", "Quarterly roadmap review is on Friday.", model="other-model")
    return conn, support


def fts_search(conn: Any, support: VectorSupport, query: str, **kw: Any) -> Any:
    return Searcher(conn, None, cfg(), support).search(SearchRequest(query=query, **kw))


def test_empty_query_returns_nothing(notes: tuple[Any, VectorSupport]) -> None:
    for q in ("", "   ", "\n\t"):
        resp = fts_search(*notes, q)
        assert resp.results == () and resp.mode == "fts-only" and resp.provider == "none"


def test_natural_question_finds_the_note(notes: tuple[Any, VectorSupport]) -> None:
    resp = fts_search(*notes, "when is the billing cutover")
    assert paths(resp)[:1] == ["memory/2026-03-02.md"]
    assert resp.results[0].snippet.startswith("Billing cutover")
    assert (resp.results[0].start_line, resp.results[0].end_line) == (1, 1)


def test_question_with_a_word_the_note_lacks_still_finds_it(notes: tuple[Any, VectorSupport]) -> None:
    resp = fts_search(*notes, "what date did we pick for the billing cutover deadline?")
    assert paths(resp)[0] == "memory/2026-03-02.md"


def test_fts_only_finds_every_indexed_chunk_whatever_its_model(notes: tuple[Any, VectorSupport]) -> None:
    assert paths(fts_search(*notes, "roadmap review")) == ["memory/model-b.md"]


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("数据库迁移", "memory/zh.md"),
        ("金银价格", "memory/zh.md"),
        ("之前讨论的数据库方案", "memory/zh.md"),
        ("議事録", "memory/ja.md"),
        ("会議の議事録はどこ", "memory/ja.md"),
        ("서버 에러", "memory/ko.md"),
        ("서버에서 에러가", "memory/ko.md"),
    ],
)
def test_cjk_keyword_search_finds_the_right_chunk(
    notes: tuple[Any, VectorSupport], query: str, expected: str
) -> None:
    assert paths(fts_search(*notes, query))[:1] == [expected]


@pytest.mark.parametrize(
    "query",
    [
        '"billing',
        'billing" AND "',
        "NEAR(billing cutover",
        "cutover*",
        "(billing OR",
        "text:billing",
        "^-billing",
    ],
)
def test_fts_syntax_in_queries_never_raises(notes: tuple[Any, VectorSupport], query: str) -> None:
    resp = fts_search(*notes, query)
    assert "memory/2026-03-02.md" in paths(resp)


def test_trigram_tokenizer_finds_cjk_and_latin_keywords(tmp_path: Path) -> None:
    conn, support = make_db(tmp_path, tokenizer="trigram")
    add_filler(conn)
    add_chunk(conn, "memory/zh.md", "我们决定把数据库迁移到新的服务器。")
    add_chunk(conn, "memory/en.md", "Billing cutover to the new invoicing system is set for March 14.")
    add_chunk(conn, "memory/ko.md", "어제 배포 후 서버 에러가 발생해서 롤백했습니다.")
    searcher = Searcher(conn, None, cfg(), support)
    assert paths(searcher.search(SearchRequest("数据库迁移")))[:1] == ["memory/zh.md"]
    assert paths(searcher.search(SearchRequest("when is the billing cutover")))[:1] == ["memory/en.md"]
    assert paths(searcher.search(SearchRequest("서버에서 에러가")))[:1] == ["memory/ko.md"]


THAI_NOTES = {
    # "We decided to move the database to the new server in March."
    "memory/th.md": "# การตัดสินใจ\n\nเราตัดสินใจย้ายฐานข้อมูลไปยังเซิร์ฟเวอร์ใหม่ในเดือนมีนาคม\n",
    # "The design team met about the welcome screen for new users."
    "memory/th-design.md": "# ประชุม\n\nทีมออกแบบประชุมเรื่องหน้าจอต้อนรับผู้ใช้ใหม่\n",
    # From the Thai seed: "Memory tools are provided by the active memory plugin."
    "memory/th-seed.md": "เครื่องมือค้นหาหน่วยความจำถูกจัดเตรียมโดยปลั๊กอินหน่วยความจำที่เปิดใช้งานอยู่\n",
    "memory/en.md": "Billing cutover to the new invoicing system is set for March 14.\n",
}


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("ฐานข้อมูล", "memory/th.md"),  # "database", inside a sentence with no spaces
        ("เซิร์ฟเวอร์", "memory/th.md"),  # "server"
        ("เราย้ายฐานข้อมูลไปที่ไหน", "memory/th.md"),  # "where did we move the database?"
        ("หน้าจอต้อนรับ", "memory/th-design.md"),  # "welcome screen"
        ("ปลั๊กอิน", "memory/th-seed.md"),  # "plugin"
    ],
)
def test_thai_keyword_inside_a_sentence_is_found_through_the_real_index(
    workspace: Path, state: Path, query: str, expected: str
) -> None:
    for rel, text in THAI_NOTES.items():
        (workspace / rel).write_text(text, encoding="utf-8")
    with index_opener(workspace, state) as open_index:
        index = open_index(make_config(sources=("memory",)))
        index.sync()
        response = index.search(SearchRequest(query))
    assert response.mode == "fts-only"
    assert paths(response) == [expected]


def test_trigram_tokenizer_finds_thai_keywords(tmp_path: Path) -> None:
    conn, support = make_db(tmp_path, tokenizer="trigram")
    add_filler(conn)
    add_chunk(conn, "memory/th.md", THAI_NOTES["memory/th.md"])
    add_chunk(conn, "memory/th-design.md", THAI_NOTES["memory/th-design.md"])
    searcher = Searcher(conn, None, cfg(), support)
    assert paths(searcher.search(SearchRequest("ฐานข้อมูล"))) == ["memory/th.md"]
    assert paths(searcher.search(SearchRequest("หน้าจอต้อนรับ"))) == ["memory/th-design.md"]


def test_max_results_and_snippet_length(tmp_path: Path) -> None:
    conn, support = make_db(tmp_path)
    for i in range(10):
        add_chunk(conn, f"memory/n{i}.md", "deployment checklist " + "x" * 2000, start_line=1 + i)
    resp = Searcher(conn, None, cfg(maxResults=3), support).search(SearchRequest(query="deployment"))
    assert len(resp.results) == 3
    assert all(len(r.snippet) == 700 for r in resp.results)
    assert (
        len(Searcher(conn, None, cfg(), support).search(SearchRequest("deployment", max_results=8)).results)
        == 8
    )


def test_candidate_count_bounds() -> None:
    assert candidate_count(6, 4) == candidate_count(30, 4) == 120  # one pool: lists start alike
    assert candidate_count(40, 4) == 160
    assert candidate_count(100, 20) == 200
    assert candidate_count(0, 4) == 120


def test_source_filter(tmp_path: Path) -> None:
    conn, support = make_db(tmp_path)
    add_chunk(conn, "memory/a.md", "vendor contract renewal")
    add_chunk(
        conn, "sessions/s1.jsonl", "User: vendor contract renewal?", source="sessions", day="2026-01-02"
    )
    searcher = Searcher(conn, None, cfg(), support)
    assert {r.source for r in searcher.search(SearchRequest("vendor contract")).results} == {
        "memory",
        "sessions",
    }
    only = searcher.search(SearchRequest("vendor contract", sources=("sessions",)))
    assert paths(only) == ["sessions/s1.jsonl"]
    default_memory_only = Searcher(conn, None, MemorySearchConfig(), support)
    assert paths(default_memory_only.search(SearchRequest("vendor contract"))) == ["memory/a.md"]


def test_date_range_filters_inclusive_and_drops_undated(tmp_path: Path) -> None:
    conn, support = make_db(tmp_path)
    for day in ("2026-01-01", "2026-01-15", "2026-02-01"):
        add_chunk(conn, f"memory/{day}.md", f"standup notes {day}", day=day)
    add_chunk(conn, "MEMORY.md", "standup notes, undated")
    searcher = Searcher(conn, None, cfg(), support)

    def days(**kw: Any) -> list[str]:
        return sorted(r.date or "-" for r in searcher.search(SearchRequest("standup notes", **kw)).results)

    assert days() == ["-", "2026-01-01", "2026-01-15", "2026-02-01"]
    assert days(after=date(2026, 1, 1), before=date(2026, 1, 15)) == ["2026-01-01", "2026-01-15"]
    assert days(after=date(2026, 1, 2)) == ["2026-01-15", "2026-02-01"]
    assert days(before=date(2026, 1, 14)) == ["2026-01-01"]


# ---------------------------------------------------------------------------- hybrid arithmetic


@pytest.fixture
def hybrid_db(tmp_path: Path) -> tuple[Any, VectorSupport, dict[str, str]]:
    conn, support = make_db(tmp_path)
    m = FixedEmbedder.model
    ids = {
        "both": add_chunk(conn, "memory/both.md", "invoice cutover plan", model=m, embedding=axis(0, 0.3)),
        "vec": add_chunk(
            conn, "memory/vec.md", "switching accounts systems", model=m, embedding=axis(0, 0.2)
        ),
        "kw": add_chunk(conn, "memory/kw.md", "invoice cutover", model=m, embedding=axis(1)),
        "far": add_chunk(conn, "memory/far.md", "gardening tips", model=m, embedding=axis(2)),
    }
    add_filler(conn, model=m)
    return conn, support, ids


def test_hybrid_explain_figures_add_up(hybrid_db: tuple[Any, VectorSupport, dict[str, str]]) -> None:
    conn, support, _ = hybrid_db
    settings = cfg(minScore=0.0, hybrid={"vectorWeight": 0.6, "textWeight": 0.6})
    searcher = Searcher(conn, FixedEmbedder({"invoice cutover": axis(0)}), settings, support)
    resp = searcher.search(SearchRequest("invoice cutover", explain=True))
    assert resp.mode == "hybrid" and resp.model == "fixed-test"
    by_path = {r.path: r for r in resp.results}
    assert set(by_path) >= {"memory/both.md", "memory/vec.md", "memory/kw.md"}
    for r in resp.results:
        e = r.explanation
        assert e is not None
        merged = ranking.combine(e.text_score, e.vector_score, vector_weight=0.5, text_weight=0.5)
        assert e.merged == pytest.approx(merged)
        assert e.final == pytest.approx(e.merged * e.decay_multiplier) == pytest.approx(r.score)
        assert e.decay_multiplier == 1.0 and e.mmr_rank is not None  # MMR is on by default
        # every candidate carries both sides, whichever list found it: here every chunk has a vector
        assert e.cosine is not None and e.vector_score is not None
        assert (e.bm25 is None) == (e.text_score is None)
    both = by_path["memory/both.md"].explanation
    assert both is not None and both.text_score is not None and both.bm25 is not None and both.bm25 < 0
    # no calibration stored with this hand-built index: the raw cosine serves as the vector score
    assert resp.calibration is None
    assert both.vector_score == both.cosine == pytest.approx(float(unit(axis(0, 0.3))[0]), abs=1e-5)
    # A small index file loads the in-memory matrix before the first query, and nothing was written
    # since: the matrix must serve (sqlite-vec or brute force here would mean the fast path was lost).
    assert both.vector_path == "matrix"
    vec_only = by_path["memory/vec.md"].explanation
    assert vec_only is not None and vec_only.text_score is None and vec_only.bm25 is None
    kw_only = by_path["memory/kw.md"].explanation  # found by keyword; its cosine read from its vector
    assert kw_only is not None and kw_only.cosine == pytest.approx(0.0, abs=1e-6)
    assert [r.score for r in resp.results] == sorted((r.score for r in resp.results), reverse=True)


def test_a_keyword_hit_the_vector_side_did_not_list_has_its_stored_vectors_cosine(tmp_path: Path) -> None:
    """More chunks near the query's vector than the vector side lists: the keyword hit, far from it,
    still has the cosine of its own stored vector (read from the in-memory matrix that served)."""
    conn, support = make_db(tmp_path)
    m = FixedEmbedder.model
    for i in range(candidate_count(6, 4) + 20):
        add_chunk(
            conn, f"memory/near/{i}.md", f"routine note number {i}", model=m, embedding=axis(0, 0.01 * i)
        )
    stored = [0.1, 0.9, 0.3, 0.0, 0.2, 0.0, 0.4, 0.0]
    add_chunk(conn, "memory/kw.md", "the zeppelin hangar", model=m, embedding=stored)
    settings = cfg(minScore=0.0, hybrid={"vectorWeight": 0.1, "textWeight": 0.9})
    searcher = Searcher(conn, FixedEmbedder({"zeppelin hangar": axis(0)}), settings, support)
    resp = searcher.search(SearchRequest("zeppelin hangar", explain=True, max_results=30))
    kw = next(r for r in resp.results if r.path == "memory/kw.md").explanation
    assert kw is not None and kw.bm25 is not None and kw.vector_path == "matrix"
    assert kw.cosine == pytest.approx(float(unit(stored)[0]), abs=1e-6)


def test_calibrated_vector_scores_are_explained_raw_and_calibrated(
    hybrid_db: tuple[Any, VectorSupport, dict[str, str]],
) -> None:
    conn, support, _ = hybrid_db
    emb = FixedEmbedder({"invoice cutover": axis(0)})
    cal = Calibration(emb.provider_key, emb.model, DIMS, centre=0.05, spread=0.02, vectors=35, probes=32)
    write_json(conn, CALIBRATION_KEY, cal.to_json())
    resp = Searcher(conn, emb, cfg(minScore=0.0), support).search(
        SearchRequest("invoice cutover", explain=True)
    )
    assert resp.calibration is not None and resp.calibration["centre"] == 0.05
    for r in resp.results:
        e = r.explanation
        assert e is not None and e.cosine is not None
        assert e.vector_score == pytest.approx(1 - math.exp(-max(0.0, (e.cosine - 0.05) / 0.02) / 10.4))
    far = next(r for r in resp.results if r.path == "memory/vec.md").explanation
    assert far is not None and far.vector_score is not None and far.vector_score > far.cosine


def test_weights_change_the_winner(hybrid_db: tuple[Any, VectorSupport, dict[str, str]]) -> None:
    conn, support, _ = hybrid_db
    emb = FixedEmbedder({"invoice cutover": axis(0)})

    def top(vw: float, tw: float) -> str:
        settings = cfg(minScore=0.0, hybrid={"vectorWeight": vw, "textWeight": tw})
        return Searcher(conn, emb, settings, support).search(SearchRequest("invoice cutover")).results[0].path

    assert top(1.0, 0.0) == "memory/vec.md"  # nearest vector
    assert top(0.0, 1.0) in ("memory/kw.md", "memory/both.md")  # keyword only
    assert top(0.5, 0.5) == "memory/both.md"  # both sides agree


def test_hybrid_keyword_side_keeps_to_the_model_and_sources(
    hybrid_db: tuple[Any, VectorSupport, dict[str, str]], tmp_path: Path
) -> None:
    conn, support, _ = hybrid_db
    emb = FixedEmbedder({"invoice cutover": axis(0)})
    searcher = Searcher(conn, emb, cfg(minScore=0.0), support)
    before = paths(searcher.search(SearchRequest("invoice cutover", max_results=20)))
    other, _ = connect(tmp_path / "index.sqlite")  # the index writes through its own connection
    add_chunk(other, "memory/stale-model.md", "invoice cutover", model="old-model", embedding=axis(0))
    add_chunk(
        other, "sessions/s.jsonl", "invoice cutover", source="sessions", model=emb.model, embedding=axis(4)
    )
    other.close()
    memory_only = searcher.search(SearchRequest("invoice cutover", max_results=20, sources=("memory",)))
    assert paths(memory_only) == before
    everything = paths(searcher.search(SearchRequest("invoice cutover", max_results=20)))
    assert "sessions/s.jsonl" in everything and "memory/stale-model.md" not in everything


def test_a_search_with_candidates_under_the_floor_says_so(tmp_path: Path) -> None:
    conn, support = make_db(tmp_path)
    m = FixedEmbedder.model
    add_filler(conn, model=m)
    add_chunk(conn, "memory/kw.md", "zeppelin hangar lease", model=m, embedding=axis(0, 3.18))  # cos ~0.3
    add_chunk(conn, "memory/vec.md", "airship storage", model=m, embedding=axis(0, 1.2))  # cos ~0.64
    emb = FixedEmbedder({"zeppelin": axis(0)})
    both = Searcher(conn, emb, cfg(), support).search(SearchRequest("zeppelin", explain=True))
    assert set(paths(both)) == {"memory/kw.md", "memory/vec.md"}
    fillers = both.held_back  # the unrelated notes among the candidates, far under the floor
    assert fillers is not None and fillers.count > 0 and fillers.best_score < 0.35
    # nothing reaches 0.99: no result, and the response says how many were held back and the best score
    strict = Searcher(conn, emb, cfg(minScore=0.99), support).search(SearchRequest("zeppelin", explain=True))
    assert strict.results == ()
    held = strict.held_back
    assert held is not None and held.count == fillers.count + 2 and held.min_score == 0.99
    assert held.best_score == pytest.approx(max(r.score for r in both.results))
    assert f"{held.count} matches scored below minScore 0.99 (best {held.best_score:.3f})" in held.note()


def test_zero_query_vector_skips_vectors_and_says_so(notes: tuple[Any, VectorSupport]) -> None:
    conn, support = notes
    add_chunk(conn, "memory/x.md", "billing cutover rehearsal", model="fixed-test", embedding=axis(0))
    resp = Searcher(conn, FixedEmbedder({}), cfg(), support).search(SearchRequest("billing cutover"))
    assert paths(resp) == ["memory/x.md"]
    assert any("all zeros" in w for w in resp.warnings)


# ---------------------------------------------------------------------------- decay and MMR


@pytest.fixture
def dated_db(tmp_path: Path) -> tuple[Any, VectorSupport]:
    conn, support = make_db(tmp_path)
    m = FixedEmbedder.model
    add_chunk(conn, "memory/2022-04-01.md", "old exact", model=m, embedding=axis(0, 0.1), day="2022-04-01")
    add_chunk(conn, "memory/2026-05-30.md", "new loose", model=m, embedding=axis(0, 1.6), day="2026-05-30")
    add_chunk(conn, "memory/2026-05-31.md", "new close", model=m, embedding=axis(0, 0.3), day="2026-05-31")
    add_chunk(conn, "MEMORY.md", "evergreen", model=m, embedding=axis(0, 0.9))
    return conn, support


def decay_cfg(enabled: bool) -> MemorySearchConfig:
    return cfg(minScore=0.0, hybrid={"temporalDecay": {"enabled": enabled}})


@freeze_time("2026-06-01 09:00:00")
def test_decay_is_off_by_default(dated_db: tuple[Any, VectorSupport]) -> None:
    conn, support = dated_db
    emb = FixedEmbedder({"q": axis(0)})
    resp = Searcher(conn, emb, cfg(minScore=0.0), support).search(SearchRequest("q", explain=True))
    assert paths(resp)[0] == "memory/2022-04-01.md"
    assert all(r.explanation is not None and r.explanation.decay_multiplier == 1.0 for r in resp.results)


@freeze_time("2026-06-01 09:00:00")
def test_decay_when_on_keeps_a_good_old_note_above_a_poor_new_one(
    dated_db: tuple[Any, VectorSupport],
) -> None:
    conn, support = dated_db
    emb = FixedEmbedder({"q": axis(0)})
    resp = Searcher(conn, emb, decay_cfg(True), support).search(SearchRequest("q", explain=True))
    order = paths(resp)
    # a near-tie goes to the recent note; the clearly better old note still beats the poor new one
    assert order.index("memory/2026-05-31.md") < order.index("memory/2022-04-01.md")
    assert order.index("memory/2022-04-01.md") < order.index("memory/2026-05-30.md")
    evergreen = next(r for r in resp.results if r.path == "MEMORY.md")
    assert evergreen.explanation is not None and evergreen.explanation.decay_multiplier == 1.0
    old = next(r for r in resp.results if r.path == "memory/2022-04-01.md").explanation
    assert old is not None and DECAY_FLOOR <= old.decay_multiplier < DECAY_FLOOR + 0.01


@freeze_time("2026-06-01 09:00:00")
def test_decay_does_not_push_old_notes_under_min_score(dated_db: tuple[Any, VectorSupport]) -> None:
    conn, support = dated_db
    emb = FixedEmbedder({"q": axis(0)})
    settings = cfg(minScore=0.6, hybrid={"temporalDecay": {"enabled": True}})
    resp = Searcher(conn, emb, settings, support).search(SearchRequest("q"))
    assert "memory/2022-04-01.md" in paths(resp)


def test_mmr_reorders_near_duplicates(tmp_path: Path) -> None:
    conn, support = make_db(tmp_path)
    m = FixedEmbedder.model
    texts = {
        "memory/a.md": ("release train ships every tuesday after the smoke tests", 0.1),
        "memory/a2.md": ("release train ships every tuesday after smoke tests pass", 0.15),
        "memory/b.md": ("hotfix policy: page the on-call before any release", 0.3),
        "memory/c.md": ("garden", 1.5),
    }
    for path, (text, noise) in texts.items():
        add_chunk(conn, path, text, model=m, embedding=axis(0, noise))
    emb = FixedEmbedder({"release": axis(0)})
    plain_cfg = cfg(minScore=0.0, hybrid={"mmr": {"enabled": False}})
    plain = Searcher(conn, emb, plain_cfg, support).search(SearchRequest("release"))
    assert paths(plain)[:3] == ["memory/a.md", "memory/a2.md", "memory/b.md"]
    mmr_cfg = cfg(minScore=0.0)  # MMR is on by default
    diverse = Searcher(conn, emb, mmr_cfg, support).search(SearchRequest("release", explain=True))
    assert paths(diverse)[:3] == ["memory/a.md", "memory/b.md", "memory/a2.md"]
    assert [r.explanation.mmr_rank for r in diverse.results if r.explanation] == list(range(4))


def test_mmr_on_cjk_results(tmp_path: Path) -> None:
    conn, support = make_db(tmp_path)
    add_filler(conn)
    add_chunk(conn, "memory/a.md", "数据库迁移计划定在三月三日晚上，数据库迁移")
    add_chunk(conn, "memory/a2.md", "数据库迁移计划定在三月三日夜里，数据库迁移")
    add_chunk(conn, "memory/b.md", "数据库备份策略：每天凌晨做一次全量")
    add_chunk(conn, "memory/c.md", "周报模板里提到一次数据库，其余都是会议安排、差旅报销和办公室搬迁的说明")
    # An ASCII-only tokenizer sees every CJK snippet as the same empty set and keeps score order.
    mmr_cfg = cfg(hybrid={"mmr": {"enabled": True, "lambda": 0.5}})
    plain = Searcher(conn, None, cfg(), support).search(SearchRequest("数据库"))
    diverse = Searcher(conn, None, mmr_cfg, support).search(SearchRequest("数据库"))
    assert (
        set(paths(plain))
        == set(paths(diverse))
        == {"memory/a.md", "memory/a2.md", "memory/b.md", "memory/c.md"}
    )
    assert set(paths(plain)[:2]) == {"memory/a.md", "memory/a2.md"}
    assert paths(diverse)[1] == "memory/b.md"


# ---------------------------------------------------------------------------- vector paths


def test_vector_path_reported_and_matrix_invalidated_by_writes(tmp_path: Path) -> None:
    conn, support = make_db(tmp_path)
    m = FixedEmbedder.model
    add_chunk(conn, "memory/a.md", "alpha", model=m, embedding=axis(0))
    searcher = Searcher(conn, FixedEmbedder({"q": axis(0)}), cfg(minScore=0.0), support)
    expected_cold = "sqlite-vec" if support.loaded else "brute-force"
    assert searcher.vector_path.name == expected_cold
    searcher.search(SearchRequest("q"))
    assert searcher.vector_path.name == "matrix"
    # a write by another connection (the index's) makes the matrix stale; the next search reloads it
    other, _ = connect(tmp_path / "index.sqlite")
    add_chunk(other, "memory/b.md", "beta", model=m, embedding=axis(0, 0.01))
    other.close()
    assert searcher.vector_path.name == expected_cold
    assert "memory/b.md" in paths(searcher.search(SearchRequest("q")))
    assert searcher.vector_path.name == "matrix"
    searcher.invalidate()
    assert searcher.vector_path.name == expected_cold and searcher.vector_path.reason
    assert Searcher(conn, None, cfg(), support).vector_path.name == "none"


# ---------------------------------------------------------------------------- real model


@pytest.mark.local_model
def test_real_embeddings_rank_the_meaning_first(tmp_path: Path, gguf_model: Path) -> None:
    from sessionmem.memory.embed.local_gguf import LocalEmbedder

    emb: Any = LocalEmbedder(str(gguf_model))  # its max_input_tokens is a read-only property
    conn, support = make_db(tmp_path, dims=384)
    notes = {
        "memory/2026-03-02.md": "Billing cutover: customers move to the new invoicing platform on March 14.",
        "memory/2026-03-03.md": "Lunch with the design team; onboarding screens need larger buttons.",
        "memory/2026-03-04.md": "The staging Kubernetes cluster was upgraded; ingress certificates renewed.",
        "MEMORY.md": "Alice prefers short written status updates over meetings.",
        "memory/2026-03-05.md": "Gardening: tomatoes need more sun; move the pots to the balcony.",
    }
    vectors = emb.embed_documents(list(notes.values()))
    for (path, text), vec in zip(notes.items(), vectors, strict=True):
        add_chunk(conn, path, text, model=emb.model, embedding=vec)
    searcher = Searcher(conn, emb, cfg(), support)
    # no word in common with the note: only the vector side can find it
    semantic = searcher.search(
        SearchRequest("when do we switch customers to the new invoice system", explain=True)
    )
    assert paths(semantic)[:1] == ["memory/2026-03-02.md"]
    assert semantic.results[0].explanation is not None and semantic.results[0].explanation.vector_score
    natural = searcher.search(SearchRequest("when is the billing cutover", explain=True))
    assert paths(natural)[:1] == ["memory/2026-03-02.md"]
    top = natural.results[0].explanation
    assert top is not None and top.text_score is not None and top.vector_score is not None
    assert paths(searcher.search(SearchRequest("who likes brief written updates")))[:1] == ["MEMORY.md"]


def test_hybrid_date_range_applies_to_vector_hits(tmp_path: Path) -> None:
    conn, support = make_db(tmp_path)
    m = FixedEmbedder.model
    for i in range(40):  # the nearest neighbours are all outside the range
        add_chunk(
            conn, f"memory/near{i}.md", f"near {i}", model=m, embedding=axis(0, 0.01 * i), day="2025-01-01"
        )
    add_chunk(
        conn, "memory/2026-02-02.md", "far but in range", model=m, embedding=axis(0, 1.0), day="2026-02-02"
    )
    emb = FixedEmbedder({"q": axis(0)})
    resp = Searcher(conn, emb, cfg(), support).search(SearchRequest("q", after=date(2026, 2, 1)))
    assert paths(resp) == ["memory/2026-02-02.md"]


def test_fts_only_honours_an_explicit_min_score(notes: tuple[Any, VectorSupport]) -> None:
    # "zebra" is in no note: the note holds two of the query's three terms, and the rarest is missing
    (hit,) = fts_search(*notes, "billing cutover zebra", explain=True).results
    assert hit.path == "memory/2026-03-02.md" and hit.score < 0.5
    empty = fts_search(*notes, "billing cutover zebra", min_score=0.5)
    assert empty.results == () and empty.held_back is not None and empty.held_back.count >= 1


def test_fts_only_holds_back_matches_far_below_the_best(tmp_path: Path) -> None:
    conn, support = make_db(tmp_path)
    add_filler(conn)
    add_chunk(conn, "memory/answer.md", "the zeppelin hangar lease runs until March")
    add_chunk(conn, "memory/noise.md", "we talked about the weather in March")
    resp = Searcher(conn, None, cfg(), support).search(SearchRequest("zeppelin hangar lease in March"))
    assert paths(resp) == ["memory/answer.md"]
    assert resp.held_back is not None and resp.held_back.count == 1


def test_hybrid_disabled_serves_vector_results_only(
    hybrid_db: tuple[Any, VectorSupport, dict[str, str]],
) -> None:
    conn, support, _ = hybrid_db
    emb = FixedEmbedder({"invoice cutover": axis(0)})
    settings = cfg(hybrid={"enabled": False})
    resp = Searcher(conn, emb, settings, support).search(SearchRequest("invoice cutover", explain=True))
    assert paths(resp) == ["memory/vec.md", "memory/both.md"]  # kw.md matches by keyword only
    assert all(r.explanation is not None and r.explanation.text_score is None for r in resp.results)
