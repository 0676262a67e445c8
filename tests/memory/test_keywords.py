"""Keyword extraction and FTS5 query building (reference §9, DESIGN decision 7)."""

from __future__ import annotations

import random
import re

import pytest

from sessionmem.memory.search import query_terms as keywords
from sessionmem.memory.search.query_terms import build_fts_query, extract_keywords, fts_phrases, fts_terms
from sessionmem.memory.store.database import connect
from sessionmem.memory.store.fts_view import fts_text
from sessionmem.memory.store.schema import fts_table_sql


def test_english_question_keeps_topic_words_only() -> None:
    kws = extract_keywords("that thing we discussed about the API")
    assert "discussed" in kws and "api" in kws
    for stop in ("that", "thing", "we", "about", "the"):
        assert stop not in kws


def test_natural_question_reduces_to_its_topic() -> None:
    assert extract_keywords("when is the billing cutover") == ["billing", "cutover"]


def test_chinese_keeps_words_and_drops_stop_words() -> None:
    kws = extract_keywords("之前讨论的那个方案")
    assert "讨论" in kws and "方案" in kws
    for stop in ("之前", "的", "那个"):
        assert stop not in kws


def test_chinese_gives_unigrams_and_bigrams() -> None:
    kws = extract_keywords("金银价格")
    assert {"金", "银", "价", "格", "金银", "银价", "价格"} <= set(kws)


def test_korean_particles_are_stripped_into_stems() -> None:
    kws = extract_keywords("서버에서 에러가 발생했어")
    assert "서버" in kws and "에러" in kws


def test_japanese_is_split_by_script() -> None:
    kws = extract_keywords("会議の議事録をデプロイ")
    assert "会議" in kws and "議事録" in kws and "デプロイ" in kws


def test_only_stop_words_and_short_words_give_nothing() -> None:
    assert extract_keywords("the a an of is") == []
    assert extract_keywords("ab ... !!") == []


def test_numbers_are_kept() -> None:
    assert extract_keywords("invoice 4521") == ["invoice", "4521"]
    assert fts_terms("ab 12 2024") == ["12", "2024"]
    assert "2026" in fts_terms("価格 2026年")


@pytest.mark.parametrize(
    ("query", "term"),
    [
        ("status of BILL-4821?", "bill-4821"),
        ("where is FOO_bar defined", "foo_bar"),
        ("regression since v2.3.1.", "v2.3.1"),
        ("the deploy of 2026-01-05", "2026-01-05"),
        ("commit a828e60 broke it", "a828e60"),
        ("mail ops@example.com", "ops@example.com"),
    ],
)
def test_identifiers_stay_whole(query: str, term: str) -> None:
    assert term in fts_terms(query)


def test_identifiers_keep_every_part_in_the_fts_query() -> None:
    """OpenClaw's case: ``FOO_bar baz-1`` lost the 1."""
    assert build_fts_query("FOO_bar baz-1") == '"foo_bar" AND "baz-1"'
    assert fts_phrases("e.g. self-care") == [
        '"self"',
        '"care"',
    ]  # "e.g" is no identifier, nor a hyphenated word


def test_reporting_verbs_and_cross_language_homographs() -> None:
    assert fts_terms("what did Caroline say about the move") == ["caroline", "move"]
    # Spanish and Portuguese stop words that are English content words stay searchable.
    assert fts_terms("her son sin era hay dime favor logo sim") == [
        "son", "sin", "era", "hay", "dime", "favor", "logo", "sim",
    ]  # fmt: skip


def test_duplicates_removed_in_order() -> None:
    assert extract_keywords("deploy Deploy DEPLOY pipeline deploy") == ["deploy", "pipeline"]


def test_mixed_spanish_portuguese_stop_words() -> None:
    assert extract_keywords("cuándo es la migración de facturación") == ["migración", "facturación"]
    assert extract_keywords("quando é a migração do faturamento") == ["migração", "faturamento"]


@pytest.mark.parametrize(
    ("query", "terms"),
    [
        ("ماذا قررنا بشأن قاعدة البيانات؟", ["قررنا", "قاعدة", "البيانات"]),
        ("¿Qué dijo usted sobre la base de datos?", ["base", "datos"]),
        ("O que você disse sobre o banco de dados?", ["banco", "dados"]),
        ("데이터베이스에 대해 알려줘", ["데이터베이스"]),
        ("请告诉我数据库的迁移", ["数据", "据库", "迁移"]),
        ("Qu’est-ce que tu as dit sur la base de données ?", ["base", "données"]),
    ],
)
def test_questions_in_other_languages_keep_their_topic_only(query: str, terms: list[str]) -> None:
    assert fts_terms(query) == terms


def test_french_question_keeps_content_words() -> None:
    assert extract_keywords("quand est-ce que nous avons décidé la migration") == ["décidé", "migration"]
    assert fts_terms("Quand est-ce que nous avons décidé la migration ?") == ["décidé", "migration"]


@pytest.mark.parametrize("apostrophe", ["'", "\u2019"])
def test_french_elisions_leave_only_the_word(apostrophe: str) -> None:
    query = "qu'est-ce que l'équipe a dit sur l'API d'authentification jusqu'à aujourd'hui"
    assert extract_keywords(query.replace("'", apostrophe)) == ["équipe", "api", "authentification"]
    assert extract_keywords("lorsqu'on s'est parlé du déploiement") == ["parlé", "déploiement"]


def test_french_stop_words_spare_english_words_of_the_same_spelling() -> None:
    assert extract_keywords("car comment font") == ["car", "comment", "font"]


def test_thai_is_split_at_stop_words_into_words_and_cluster_pairs() -> None:
    # "when did we decide about the database": we / about / when are stop words.
    kws = extract_keywords("เราตัดสินใจเรื่องฐานข้อมูลเมื่อไหร่")
    assert kws[:2] == ["ตัดสินใจ", "ตัด"] and "ฐานข้อมูล" in kws and "ข้อ" in kws
    for stop in ("เรา", "เรื่อง", "เมื่อไหร่"):
        assert stop not in kws
    # Keyword search: pairs of clusters (a consonant with its vowel and tone marks), never a lone mark.
    assert fts_terms("ฐานข้อมูล") == ["ฐา", "าน", "นข้", "ข้อ", "อมู", "มูล"]
    assert fts_terms("ตัดสินใจเรื่องฐานข้อมูล")[:4] == ["ตัด", "ดสิ", "สิน", "นใ"]


def test_thai_stop_word_inside_a_word_does_not_orphan_a_syllable() -> None:
    assert "ภูเขา" in extract_keywords("ภูเขา")  # เขา ("he") after one cluster stays in the word
    assert extract_keywords("ชนะ")[:1] == ["ชนะ"]  # นะ (a particle) likewise
    assert extract_keywords("ครับ ค่ะ อะไร") == []


def test_thai_glued_to_latin_keeps_both() -> None:
    terms = fts_terms("หน่วยความจำของOpenClawคือ")
    assert "openclaw" in terms and "หน่" in terms and "จำ" in terms
    assert not any("ของ" in t or "คือ" in t for t in terms)


def test_thai_text_is_spaced_by_cluster_for_fts() -> None:
    assert fts_text("ข้อมูล") == " ข้  อ  มู  ล "
    assert fts_text("OpenClawคือ") == "OpenClaw คื  อ "


def test_thai_word_inside_a_sentence_matches_through_fts5() -> None:
    conn, _ = connect(":memory:", load_vector=False)
    conn.executescript(fts_table_sql("porter"))
    for cid, text in (
        ("hit", "เราตัดสินใจย้ายฐานข้อมูลไปยังเซิร์ฟเวอร์ใหม่"),
        ("miss", "ทีมออกแบบประชุมเรื่องหน้าจอต้อนรับผู้ใช้ใหม่"),
    ):
        conn.execute("INSERT INTO chunks_fts(text, id) VALUES (?, ?)", (fts_text(text), cid))
    for query in ("ฐานข้อมูล", "เซิร์ฟเวอร์"):
        match = build_fts_query(query)
        assert conn.execute("SELECT id FROM chunks_fts WHERE chunks_fts MATCH ?", (match,)).fetchall() == [
            ("hit",)
        ]


def test_build_fts_query_quotes_every_term() -> None:
    assert build_fts_query("billing cutover") == '"billing" AND "cutover"'
    assert build_fts_query("billing cutover", operator="OR") == '"billing" OR "cutover"'
    assert build_fts_query("   ") is None
    assert build_fts_query("") is None


def test_cjk_terms_become_phrases_of_the_indexed_form() -> None:
    q = build_fts_query("金银价格")
    assert q == '"金  银" AND "银  价" AND "价  格"'
    conn, _ = connect(":memory:", load_vector=False)
    conn.executescript(fts_table_sql("porter"))
    for cid, text in (("hit", "今天金银价格上涨"), ("miss", "金价上涨，银行放假")):
        conn.execute("INSERT INTO chunks_fts(text, id) VALUES (?, ?)", (fts_text(text), cid))
    assert conn.execute("SELECT id FROM chunks_fts WHERE chunks_fts MATCH ?", (q,)).fetchall() == [("hit",)]


def test_fts_terms_use_korean_stems_and_chinese_pairs() -> None:
    assert fts_terms("서버에서 에러가") == ["서버", "에러"]
    assert fts_terms("之前讨论的那个方案") == ["讨论", "方案"]


def test_stop_word_only_query_falls_back_to_raw_words() -> None:
    assert fts_terms("the") == ["the"]
    assert fts_phrases("the") == ['"the"']
    assert fts_phrases(" \t ") == []


HOSTILE = [
    '"',
    '"unbalanced quote',
    'a "b" c"',
    "billing AND",
    "AND OR NOT",
    "NEAR(billing cutover",
    "NEAR(a b, 3)",
    "cut*",
    "*",
    "(billing",
    "billing)",
    "text:billing",
    "^billing",
    "-billing",
    "billing - cutover",
    "{text}: billing",
    "'; DROP TABLE chunks; --",
    '\\" \\',
    "c++ c# .net",
    "🙂 emoji 🙂",
]


@pytest.mark.parametrize("query", HOSTILE)
def test_fts_syntax_in_queries_never_raises(query: str) -> None:
    conn, _ = connect(":memory:", load_vector=False)
    conn.executescript(fts_table_sql("porter"))
    conn.execute(
        "INSERT INTO chunks_fts(text, id, path, source, model, start_line, end_line)"
        " VALUES (?, 'c1', 'MEMORY.md', 'memory', 'fts-only', 1, 1)",
        (fts_text("billing cutover text near and or not"),),
    )
    for match in (build_fts_query(query, operator="AND"), build_fts_query(query, operator="OR")):
        if match is None:
            continue
        conn.execute("SELECT id FROM chunks_fts WHERE chunks_fts MATCH ?", (match,)).fetchall()


# ---------------------------------------------------------------------------- linear cost

# The pattern the identifier scan replaced: right on short words (the reference here), n^2 steps on a long
# one (a 40,000-letter word took 21 s in it).
OLD_IDENTIFIER = re.compile(r"[^\W_]+(?:[-_./:@#+][^\W_]+)+")
OLD_JOINED_WORDS = re.compile(r"[^\W\d_]+(?:[-:][^\W\d_]+)+")


def old_identifiers(word: str) -> list[str]:
    return [m.group(0) for m in OLD_IDENTIFIER.finditer(word) if not OLD_JOINED_WORDS.fullmatch(m.group(0))]


def test_identifiers_are_found_as_the_old_pattern_found_them() -> None:
    alphabet = [*"ab1Z_-./:@#+!,'é²½٣$", "ß", "\u0301"]
    rng = random.Random(5)
    for _ in range(20_000):
        word = "".join(rng.choice(alphabet) for _ in range(rng.randrange(1, 14)))
        assert [word[a:b] for a, b in keywords._identifier_spans(word)] == old_identifiers(word), word
        assert keywords._is_identifier(word) == (OLD_IDENTIFIER.fullmatch(word) is not None), word


@pytest.mark.parametrize(
    "word",
    [
        "k" * 40_000,  # one run: the old pattern retried it from each letter
        "a1-" * 13_000,  # one identifier of 26,000 parts
        "a." * 20_000,
        "ab" * 20_000 + "-",
        "self-care-" * 4_000,  # joined words, split
        "-" * 40_000,
        "x_" * 20_000 + "9",
        "é²" * 20_000,
    ],
)
def test_a_long_word_is_read_once_per_step(monkeypatch: pytest.MonkeyPatch, word: str) -> None:
    """The keyword parser classifies each character of the query once to cut it, and once more to check
    a term it kept: work in proportion to the length, whatever the characters."""
    calls = 0
    classify = keywords._char_kind

    def counted(ch: str) -> str:
        nonlocal calls
        calls += 1
        return classify(ch)

    monkeypatch.setattr(keywords, "_char_kind", counted)
    terms = fts_terms(word)
    assert bool(terms) == any(ch.isalnum() for ch in word)  # a long word is still a word to search
    assert calls <= 2 * len(word)


def test_phrases_are_unique_and_in_order_for_many_terms() -> None:
    words = [f"zq{i:05d}" for i in range(20_000)]
    phrases = fts_phrases(" ".join(words + words[::-1]))
    assert phrases == [f'"{w}"' for w in words]
