"""Query keywords and safe FTS5 queries.

``extract_keywords`` turns a natural question into the words worth matching (OpenClaw's
``query-expansion.ts``, reference §9): stop words of nine languages dropped, Korean particles
stripped, Japanese split into script runs, Chinese into characters and character pairs, Thai
(written without spaces) cut at its stop words into words and pairs of clusters. French elisions
(``l'``, ``d'``, ``qu'``, ``jusqu'``) fall away: the apostrophe splits them off and they are stop words.

``fts_queries`` turns a query into FTS5 MATCH strings. Every term is a double-quoted string, so
FTS5 operators typed by a user (``AND``, ``NEAR(``, ``*``, ``:``, ``^``, ``-``, parentheses, stray
quotes) are plain text and can never raise a syntax error. Chinese, Japanese and Korean terms
become phrases of single characters, Thai terms phrases of clusters: the form
``ftstext.fts_text`` stores (#20730).

Why AND first, then OR: qmd ANDs every query word, so "when is the billing cutover" finds nothing
while "billing cutover" finds the note. Stop words are dropped first (the AND of the remaining
meaningful words is precise when it matches), and when it matches nothing the OR of the same words
runs; BM25 ranks the notes that match more and rarer words first.
"""

from __future__ import annotations

import re
import unicodedata

from sessionmem.memory.ftstext import THAI_CHARS, THAI_CLUSTER, fts_text

# ---------------------------------------------------------------------------- stop words


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


STOP_WORDS_EN = _words(
    """
    a an the this that these those i me my mine myself we us our ours you your yours he him his she her
    hers it its they them their theirs who whom whose which what when where why how whatever whenever is
    am are was were be been being do does did doing done have has had having will would shall should can
    could may might must ought to of in on at by for with about against between into through during
    before after above below from up down out off over under again further then once and or but nor so
    yet if because as until while than too very also not no yes any some all both each few more most
    other such own same only there here yesterday today tomorrow earlier later recently ago just now
    soon currently thing things stuff something anything everything nothing someone anyone somebody
    anybody please help find show get tell give let know remember recall look search lookup want need
    did didn don doesn isn aren wasn weren won wouldn couldn shouldn hasn haven hadn
    """
)

STOP_WORDS_ES = _words(
    """
    el la los las un una unos unas de del al y o u e ni que qué en con por para sin sobre entre como
    cómo cuando cuándo donde dónde quien quién cual cuál es son era fue ser estar está están estaba hay
    ha han he lo le les se su sus mi mis tu tus yo tú él ella nosotros ellos ellas este esta esto estos
    estas ese esa eso aquel muy más pero si sí no ya también porque ayer hoy mañana antes después ahora
    algo cosa cosas favor ayuda busca buscar muestra dime
    """
)

STOP_WORDS_PT = _words(
    """
    o a os as um uma uns umas de do da dos das e ou em no na nos nas com por para sem sobre entre como
    quando onde quem qual que é são era foi ser estar está estão estava há tem têm eu tu ele ela nós
    eles elas este esta isto estes estas esse essa isso aquele aquela muito mais mas se sim não já
    também porque ontem hoje amanhã antes depois agora algo coisa coisas favor ajuda busque mostre diga
    meu minha seu sua
    """
)

# The elided forms (l', d', qu', jusqu', aujourd'hui's "aujourd" and "hui") are here because
# _segments splits at the apostrophe (' and ’ are punctuation), leaving them as words of their own.
# Left out because English spells a content word the same: car, comment, font, ton, dire, personne.
STOP_WORDS_FR = _words(
    """
    le la les l un une des du de d au aux ce cet cette ces c ça cela ceci celui celle ceux celles et
    ou où mais donc ni que qu quoi qui quand pourquoi combien quel quelle quels quelles lequel laquelle
    dont est es suis sommes êtes sont était étais étaient été être ai as avons avez ont avait avais
    avaient eu avoir fait faire fais je j me m moi tu t te toi il elle on nous vous ils elles se s lui
    leur leurs mon ma mes ta tes sa ses notre nos votre vos y en dans sur sous avec sans pour par chez
    entre vers depuis pendant avant après jusqu lorsqu puisqu quoiqu quelqu presqu aujourd hui ne n pas
    plus moins très trop aussi encore déjà toujours jamais si oui non tout tous toute toutes autre
    autres même mêmes chose choses truc quelque quelques rien hier demain maintenant récemment bientôt
    tard tôt là ici à dit dis rappelle souviens cherche chercher trouve trouver montre montrer aide
    aider besoin veux voudrais sais peux pouvez
    """
)

STOP_WORDS_AR = _words(
    """
    في من إلى على عن مع هذا هذه ذلك تلك الذي التي الذين ما ماذا متى أين كيف لماذا هل و أو ثم لا لم لن إن
    أن كان كانت يكون هو هي هم هن نحن أنا أنت أنتم كل بعض قد لقد عند بين أمس اليوم غدا الآن
    """
)

STOP_WORDS_ZH = _words(
    """
    的 了 和 是 在 我 有 他 她 它 就 不 也 都 很 到 说 要 去 你 会 着 看 这 那
    个 吗 呢 吧 啊 呀 与 或 但 把 被 让 给 对 从 之前 之后 以前 以后 那个 这个 那些
    这些 什么 怎么 怎样 为什么 哪个 哪里 时候 我们 你们 他们 她们 一个 一些 昨天 今天
    明天 刚才 现在 最近 东西 事情 请 帮 帮我 找 告诉 讨论过
    """
)

STOP_WORDS_KO = _words(
    """
    그 이 저 것 거 수 등 및 또는 그리고 그러나 하지만 그래서 때 때문 어디 언제 무엇 뭐
    누구 어떻게 왜 우리 저희 나 너 제 내 있다 없다 하다 했다 했어 했나 했지 합니다
    입니다 이다 아니다 어제 오늘 내일 지금 최근 전에 그거 이거 저거 무슨 어떤 좀 주세요
    알려줘 찾아줘 보여줘
    """
)

STOP_WORDS_JA = _words(
    """
    これ それ あれ この その あの ここ そこ あそこ こと もの ため よう です ます でした
    ました する した して います いる ある あった なる なった から まで より について
    という といった ところ とき など ので のに けど けれど でも しかし そして また 昨日
    今日 明日 最近 今 前 後 何 なに どこ いつ だれ 誰 どう どの どれ なぜ ください
    教えて 探して
    """
)

# Thai has no spaces, so these are found inside a run (_thai_fragments), longest first. Left out
# because they begin or end common content words: การ and ความ (they make nouns: ความจำ, memory),
# อัน (อันตราย), กัน (กันยายน, September), หา (ปัญหา).
STOP_WORDS_TH = _words(
    """
    ที่ ซึ่ง และ หรือ แต่ กับ ของ ใน จาก ถึง ให้ ได้ แล้ว จะ ก็ คือ เป็น มี ว่า นี้ นั้น โดย เพื่อ
    เมื่อ ถ้า หาก ยัง อยู่ ไม่ ไหม มั้ย อะไร ทำไม อย่างไร ยังไง เมื่อไร เมื่อไหร่ ตอนไหน ที่ไหน ใคร
    เรา พวกเรา ฉัน ผม คุณ เขา ครับ ค่ะ คะ นะ เลย บ้าง เคย เกี่ยวกับ เรื่อง ช่วย บอก หน่อย ไป มา
    มาก ไว้ ตอน ตอนนี้ เมื่อวาน วันนี้ พรุ่งนี้ ล่าสุด เมื่อกี้ ได้ไหม
    """
)

STOP_WORDS = (
    STOP_WORDS_EN
    | STOP_WORDS_ES
    | STOP_WORDS_PT
    | STOP_WORDS_FR
    | STOP_WORDS_AR
    | STOP_WORDS_ZH
    | STOP_WORDS_KO
    | STOP_WORDS_JA
    | STOP_WORDS_TH
)

# Longest first, so 에서 is stripped before 서 could be mistaken for a particle.
KOREAN_PARTICLES = (
    "에서", "으로", "에게", "한테", "처럼", "같이", "보다", "까지", "부터", "마다", "밖에", "대로",
    "은", "는", "이", "가", "을", "를", "의", "에", "로", "와", "과", "도", "만",
)  # fmt: skip

# ---------------------------------------------------------------------------- scripts

_HAN = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
_HIRAGANA = "\u3040-\u309f"
_KATAKANA = "\u30a0-\u30ff\u31f0-\u31ff\uff66-\uff9f"
_HANGUL = "\uac00-\ud7af\u1100-\u11ff\u3130-\u318f"

_HAS_HAN = re.compile(f"[{_HAN}]")
_HAS_KANA = re.compile(f"[{_HIRAGANA}{_KATAKANA}]")
_HAS_HANGUL = re.compile(f"[{_HANGUL}]")
_HAS_THAI = re.compile(f"[{THAI_CHARS}]")
_THAI_RUN = re.compile(f"[{THAI_CHARS}]+")
# Vowels written before the consonant they follow in speech: a word never ends on one.
_THAI_LEADING_VOWELS = frozenset("\u0e40\u0e41\u0e42\u0e43\u0e44")
# Vowels that close a syllable (ะ า ำ ๅ): a word never starts with one.
_THAI_FOLLOWING_VOWELS = frozenset("\u0e30\u0e32\u0e33\u0e45")
_HAN_RUN = re.compile(f"[{_HAN}]+")
_KATAKANA_RUN = re.compile(f"[{_KATAKANA}]+")
_HIRAGANA_RUN = re.compile(f"[{_HIRAGANA}]{{2,}}")
_ASCII_WORD = re.compile(r"[a-z0-9_]+")
_ASCII_LETTERS = re.compile(r"[a-z]+")
_DIGITS = re.compile(r"\d+")
_WORD = re.compile(r"\w+")


def _is_separator(ch: str) -> bool:
    return ch.isspace() or unicodedata.category(ch).startswith("P")


def _segments(text: str) -> list[str]:
    """Split on whitespace and Unicode punctuation (``[\\s\\p{P}]+``)."""
    out: list[str] = []
    current: list[str] = []
    for ch in text:
        if _is_separator(ch):
            if current:
                out.append("".join(current))
                current = []
        else:
            current.append(ch)
    if current:
        out.append("".join(current))
    return out


def _pairs(run: str) -> list[str]:
    return [run[i : i + 2] for i in range(len(run) - 1)]


def _japanese(segment: str, *, fts: bool) -> list[str]:
    out = list(_ASCII_WORD.findall(segment))
    out += _KATAKANA_RUN.findall(segment)
    for run in _HAN_RUN.findall(segment):
        out.append(run)
        if len(run) > 2 and not fts:  # the run as a phrase already implies its pairs
            out += _pairs(run)
    hiragana = _HIRAGANA_RUN.findall(segment)
    # Hiragana runs are mostly grammar; the keyword search only uses them when nothing else is there.
    out += hiragana if not (fts and out) else []
    return out


def _chinese(segment: str, *, fts: bool) -> list[str]:
    out: list[str] = []
    for run in _HAN_RUN.findall(segment):
        if not fts:
            out += list(run)
            out += _pairs(run)
            continue
        # Keyword search: character pairs carry the meaning (an AND over every character of a
        # sentence would almost never match); pairs holding a one-character stop word are noise.
        pairs = [p for p in _pairs(run) if p not in STOP_WORDS and not any(c in STOP_WORDS for c in p)]
        out += pairs or list(run)
    # A Latin word glued to Han text ("api设计") is kept rather than dropped.
    out += _ASCII_WORD.findall(segment)
    return out


def _clusters(text: str) -> tuple[str, ...]:
    return tuple(THAI_CLUSTER.findall(text))


# Thai stop words as clusters, grouped by their first cluster, longest first.
_THAI_STOPS: dict[str, list[tuple[str, ...]]] = {}
for _word in sorted(STOP_WORDS_TH, key=lambda w: -len(_clusters(w))):
    _THAI_STOPS.setdefault(_clusters(_word)[0], []).append(_clusters(_word))


def _thai_stop_at(clusters: tuple[str, ...], i: int) -> int:
    """How many clusters the longest stop word starting at ``clusters[i]`` spans (0: none)."""
    for stop in _THAI_STOPS.get(clusters[i], ()):
        end = i + len(stop)
        if clusters[i:end] == stop and (end == len(clusters) or clusters[end] not in _THAI_FOLLOWING_VOWELS):
            return len(stop)
    return 0


def _thai_fragments(run: str) -> list[tuple[str, ...]]:
    """The pieces of a Thai run between its stop words, as clusters.

    A stop word is not cut out right after a single cluster or a leading vowel: there it is the end of
    a word (ภู|เขา, mountain; ช|นะ, win), not a word of its own. A wrong cut costs precision, never
    recall: every piece is a substring of the query, so a note holding the query holds every piece.
    """
    clusters = _clusters(run)
    pieces: list[tuple[str, ...]] = []
    current: list[str] = []
    i = 0
    while i < len(clusters):
        glued = len(current) == 1 or (bool(current) and current[-1] in _THAI_LEADING_VOWELS)
        span = 0 if glued else _thai_stop_at(clusters, i)
        if span:
            if current:
                pieces.append(tuple(current))
                current = []
            i += span
            continue
        current.append(clusters[i])
        i += 1
    if current:
        pieces.append(tuple(current))
    return pieces


def _thai(segment: str, *, fts: bool) -> list[str]:
    out: list[str] = []
    for run in _THAI_RUN.findall(segment):
        for piece in _thai_fragments(run):
            if len(piece) < 2:
                continue  # a lone cluster is a letter, not a word
            # Cluster pairs, like Chinese character pairs: without a dictionary the word boundaries
            # are unknown, and the AND of the pairs finds the words wherever the note has them.
            pairs = ["".join(piece[i : i + 2]) for i in range(len(piece) - 1)]
            if fts:
                out += pairs
            else:
                out.append("".join(piece))
                out += pairs if len(piece) > 2 else []
    # Text glued to the Thai ("OpenClawคือ") is kept as words of its own.
    out += [piece for piece in _THAI_RUN.split(segment) if piece]
    return out


def _strip_particle(word: str) -> str:
    for particle in KOREAN_PARTICLES:
        if len(word) > len(particle) and word.endswith(particle):
            return word[: -len(particle)]
    return word


def _korean(segment: str, *, fts: bool) -> list[str]:
    stem = _strip_particle(segment)
    if segment in STOP_WORDS or stem in STOP_WORDS:
        return []
    useful_stem = stem != segment and (
        (len(stem) >= 2 and _HAS_HANGUL.search(stem) is not None)
        or (stem.isascii() and _WORD.fullmatch(stem) is not None)
    )
    if fts and useful_stem:
        return [stem]  # the stem's phrase also matches the inflected word (characters are split)
    return [segment, stem] if useful_stem else [segment]


def _meaningful(token: str) -> bool:
    if not token or token in STOP_WORDS:
        return False
    if _DIGITS.fullmatch(token):
        return False
    if token.isascii() and _ASCII_LETTERS.fullmatch(token) and len(token) < 3:
        return False
    return any(ch.isalnum() for ch in token)


def _extract(query: str, *, fts: bool) -> list[str]:
    tokens: list[str] = []
    for segment in _segments(query.lower()):
        if _HAS_KANA.search(segment):
            tokens += _japanese(segment, fts=fts)
        elif _HAS_HAN.search(segment):
            tokens += _chinese(segment, fts=fts)
        elif _HAS_HANGUL.search(segment):
            tokens += _korean(segment, fts=fts)
        elif _HAS_THAI.search(segment):
            tokens += _thai(segment, fts=fts)
        else:
            tokens.append(segment)
    seen: set[str] = set()
    out: list[str] = []
    for token in tokens:
        if token not in seen and _meaningful(token):
            seen.add(token)
            out.append(token)
    return out


def extract_keywords(query: str) -> list[str]:
    """The words of ``query`` worth searching for, in order, without duplicates (reference §9)."""
    return _extract(query, fts=False)


# ---------------------------------------------------------------------------- FTS5 queries


def _quote(term: str) -> str | None:
    """One FTS5 string: CJK characters and Thai clusters spaced exactly like the indexed text, inner
    quotes removed.

    The exact spacing (``fts_text`` puts a space on each side of every CJK character, so two
    between neighbours) matters for the ``trigram`` tokenizer, which matches substrings;
    ``unicode61`` ignores it.
    """
    spaced = fts_text(term.replace('"', " ")).strip()
    if not any(ch.isalnum() for ch in spaced):
        return None  # would be an empty phrase: matches nothing and would void an AND
    return f'"{spaced}"'


def fts_terms(query: str) -> list[str]:
    """Terms for the keyword search: the meaningful keywords, else the raw words of the query.

    Unlike ``extract_keywords`` this keeps the fewest terms that carry the meaning: Chinese character
    pairs rather than single characters, a Korean stem rather than stem and inflected word, a kanji
    run rather than its pairs, Thai cluster pairs rather than the words between stop words.
    """
    terms = _extract(query, fts=True)
    if terms:
        return terms
    return [w for w in _segments(query.lower()) if any(c.isalnum() for c in w)]


def build_fts_query(raw: str, *, operator: str = "AND") -> str | None:
    """A MATCH expression joining the quoted terms of ``raw`` with ``operator``; None when empty."""
    if operator not in ("AND", "OR"):
        raise ValueError(f"FTS operator must be AND or OR, not {operator!r}")
    quoted: list[str] = []
    for term in fts_terms(raw):
        q = _quote(term)
        if q is not None and q not in quoted:
            quoted.append(q)
    if not quoted:
        return None
    return f" {operator} ".join(quoted)


def fts_queries(raw: str) -> list[str]:
    """The MATCH expressions to try in order: the AND of all terms, then their OR (when different)."""
    strict = build_fts_query(raw, operator="AND")
    if strict is None:
        return []
    loose = build_fts_query(raw, operator="OR")
    return [strict] if loose == strict or loose is None else [strict, loose]
