"""Query keywords and safe FTS5 queries.

``extract_keywords`` turns a natural question into the words worth matching (OpenClaw's
``query-expansion.ts``, reference §9): stop words of nine languages dropped, Korean particles
stripped, Japanese split into script runs, Chinese into characters and character pairs, Thai
(written without spaces) cut at its stop words into words and pairs of clusters. French elisions
(``l'``, ``d'``, ``qu'``, ``jusqu'``) fall away: the apostrophe splits them off and they are stop words.

Unlike OpenClaw, numbers and identifiers are kept: "invoice 4521" searches for 4521 (OpenClaw drops
pure numbers, so it found invoice 9999 as well), and ``BILL-4821``, ``FOO_bar``, ``v2.3.1``,
``2026-01-05`` stay one term each, searched as the phrase of their parts (which is how the index
splits them), so a code is found as written and not as every note holding one of its pieces.

``fts_phrases`` turns a query into quoted FTS5 phrases (``fts_search`` ORs them). Every term is a
double-quoted string, so FTS5 operators typed by a user (``AND``, ``NEAR(``, ``*``, ``:``, ``^``,
``-``, parentheses, stray quotes) are plain text and can never raise a syntax error. Chinese,
Japanese and Korean terms become phrases of single characters, Thai terms phrases of clusters: the
form ``ftstext.fts_text`` stores (#20730).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable

from sessionmem.memory.store.fts_view import (
    HAN,
    HANGUL,
    HIRAGANA,
    KATAKANA,
    THAI_CHARS,
    THAI_CLUSTER,
    fts_text,
)

# ---------------------------------------------------------------------------- stop words


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


# Each list is the language's function words, question words, vague time words and request verbs.
# A word that is also a content word in another language the index meets is left out (noted per list):
# the union of the lists is applied to every query, whatever its language.

STOP_WORDS_EN = _words(
    """
    a an the this that these those i me my mine myself we us our ours ourselves you your yours yourself
    he him his himself she her hers herself it its itself they them their theirs themselves who whom
    whose which what when where why how whatever whenever wherever whoever is am are was were be been
    being do does did doing done have has had having will would shall should can could may might must
    ought to of in on at by for with about against between into through during before after above below
    from up down out off over under again further then once and or but nor so yet if because as until
    while than too very also not no yes any some all both each few more most other such own same only
    there here yesterday today tomorrow earlier later recently ago just now soon currently thing things
    stuff something anything everything nothing someone anyone somebody anybody please help find show
    get tell give let know remember recall look search lookup want need
    did didn don doesn isn aren wasn weren won wouldn couldn shouldn hasn haven hadn
    say said says saying talk talked talks talking mention mentioned mentions told
    """
)
# "Talk about", "say about", "mention": how a question asks what was said, not what it was about
# (measured on LoCoMo: R@1 +0.003). "Discussed" stays: OpenClaw keeps it ("the API we discussed").

# Left out: son, era, sin, hay, dime, favor, solo, van (English words).
STOP_WORDS_ES = _words(
    """
    el la los las lo un una unos unas de del al a y o u e ni que qué en con por para sobre entre
    hacia hasta desde contra según como cómo cuando cuándo donde dónde adonde quien quién quienes cual
    cuál cuales cuánto cuánta cuántos cuántas porqué es ser estar está están estaba estaban estoy
    estamos fue fueron sido siendo ha han he has hemos había habían haber tener tiene tienen tenía
    hacer hace hizo hecho le les se su sus mi mis tu tus yo tú él ella ello nosotros nosotras vosotros
    ellos ellas usted ustedes me te nos os este esta esto estos estas ese esa eso esos esas aquel aquella
    aquello muy más menos pero si sí no ya también tampoco porque pues aunque ayer hoy mañana antes
    después despues ahora luego recientemente algo alguien nada nadie cosa cosas ayuda busca
    buscar muestra dijo
    """
)

# Left out: era, sim, seu, logo, favor (English words).
STOP_WORDS_PT = _words(
    """
    o a os as um uma uns umas de do da dos das e ou em no na nos nas num numa com por pelo pela pelos
    pelas para sem sobre entre até desde contra como quando onde aonde quem qual quais quanto quanta
    quantos quantas que quê porquê é são foi foram ser sido sendo estar está estão estava estavam há
    tem têm tinha ter fazer faz fez feito eu tu ele ela nós vós eles elas você vocês me te se lhe lhes
    meu minha meus minhas teu tua sua seus suas nosso nossa este esta isto estes estas esse essa isso
    esses essas aquele aquela aquilo muito muita mais menos mas não já também porque pois embora
    ontem hoje amanhã antes depois agora recentemente algo alguém nada ninguém coisa coisas
    ajuda busque mostre diga disse
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
    في من إلى الى على عن مع هذا هذه ذلك تلك هنا هناك الذي التي الذين اللذان اللتان ما ماذا متى أين كيف
    لماذا هل و أو ثم بل لكن لا لم لن إن أن إذا كان كانت يكون تكون كانوا صار أصبح هو هي هم هن نحن أنا
    أنت أنتم كل بعض أي قد لقد عند بين قبل بعد حتى منذ أمس بالأمس امس اليوم غدا الآن مؤخرا يمكن ممكن
    شيء أشياء فضلا ساعد ساعدني بشأن حول
    """
)

STOP_WORDS_ZH = _words(
    """
    的 了 和 是 在 我 有 他 她 它 就 不 也 都 很 到 说 要 去 你 会 着 看 这 那 过 得 地 嘛 啦
    个 吗 呢 吧 啊 呀 与 或 但 把 被 让 给 对 从 之前 之后 以前 以后 那个 这个 那些 而 还 又 再
    这些 什么 怎么 怎样 为什么 哪个 哪些 哪里 多少 时候 我们 你们 他们 她们 一个 一些 昨天 今天
    明天 刚才 现在 最近 东西 事情 请 帮 帮我 帮忙 找 告诉 讨论过 但是 因为 所以 如果 虽然 可以
    """
)

STOP_WORDS_KO = _words(
    """
    그 이 저 것 거 수 등 및 또는 그리고 그러나 하지만 그래서 그런데 그러면 때 때문 곳 중 어디 언제
    무엇 뭐 누구 어떻게 왜 어떤 무슨 우리 저희 나 너 제 내 나는 내가 나를 그녀 그들 이것 저것 그것
    여기 저기 거기 있다 없다 하다 했다 했어 했나 했지 합니다 입니다 이다 아니다 되다 주다 어제 오늘
    내일 지금 최근 아까 나중 전에 그거 이거 저거 잘 더 또 매우 정말 아주 많이 너무 좀 주세요 제발
    부탁 알려줘 찾아줘 보여줘 대해 대한 관해 관한
    """
)

STOP_WORDS_JA = _words(
    """
    これ それ あれ どれ この その あの どの ここ そこ あそこ どこ こと もの ため よう です ます
    でした ました する した して します いる います ある あった あります なる なった できる から まで
    より だけ について という といった ところ とき など ので のに けど けれど でも しかし そして また
    昨日 今日 明日 最近 今 さっき 前 後 何 なに いつ だれ 誰 どう なぜ ください 教えて 探して
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

# Shorter Latin words ("go", "tv") are dropped, as OpenClaw does (keeping them: LoCoMo R@6 +0.001).
MIN_LATIN_LETTERS = 3

# Longest first, so 에서 is stripped before 서 could be mistaken for a particle.
KOREAN_PARTICLES = (
    "에서", "으로", "에게", "한테", "처럼", "같이", "보다", "까지", "부터", "마다", "밖에", "대로",
    "은", "는", "이", "가", "을", "를", "의", "에", "로", "와", "과", "도", "만",
)  # fmt: skip

# ---------------------------------------------------------------------------- scripts

# The scripts as the index splits them (ftstext); a query's half-width katakana counts as Japanese too.
_KATAKANA = KATAKANA + "\uff66-\uff9f"

_HAS_HAN = re.compile(f"[{HAN}]")
_HAS_KANA = re.compile(f"[{HIRAGANA}{_KATAKANA}]")
_HAS_HANGUL = re.compile(f"[{HANGUL}]")
_HAS_THAI = re.compile(f"[{THAI_CHARS}]")
_THAI_RUN = re.compile(f"[{THAI_CHARS}]+")
# Vowels written before the consonant they follow in speech: a word never ends on one.
_THAI_LEADING_VOWELS = frozenset("\u0e40\u0e41\u0e42\u0e43\u0e44")
# Vowels that close a syllable (ะ า ำ ๅ): a word never starts with one.
_THAI_FOLLOWING_VOWELS = frozenset("\u0e30\u0e32\u0e33\u0e45")
_HAN_RUN = re.compile(f"[{HAN}]+")
_KATAKANA_RUN = re.compile(f"[{_KATAKANA}]+")
_HIRAGANA_RUN = re.compile(f"[{HIRAGANA}]{{2,}}")
_ASCII_WORD = re.compile(r"[a-z0-9_]+")
_ASCII_LETTERS = re.compile(r"[a-z]+")
_WORD = re.compile(r"\w+")
# Letters or digits joined by single connectors, as identifiers, versions, dates and codes are written.
# Without a digit, only "_ . @ # +" make one: letters joined by a hyphen or a colon are words ("est-ce",
# "self-care", "text:billing"), split like any other.
#
# Trigger: one pattern for the whole identifier (``[^\W_]+(?:[-_./:@#+][^\W_]+)+``) backtracked: a word
# of n letters with no connector cost n^2 steps (40,000 letters: 21 s, holding the interpreter lock).
# Why: the engine retried the run from every letter inside it. Outcome: each character of a word is
# classified once (``_char_kind``) into pieces, and the pieces are joined in one pass.
_CONNECTORS = frozenset("-_./:@#+")
_JOINERS_OF_WORDS = frozenset("-:")
_HAS_WIDE = re.compile(f"[{HAN}{HIRAGANA}{_KATAKANA}{HANGUL}{THAI_CHARS}]")


def _is_separator(ch: str) -> bool:
    return ch.isspace() or unicodedata.category(ch).startswith("P")


def _split_punctuation(text: str) -> list[str]:
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


_Piece = tuple[int, int, str]  # (start, end, kind) of a stretch of a word


def _char_kind(ch: str) -> str:
    """``run`` for a letter or digit (``[^\\W_]``), ``connector`` for one of ``-_./:@#+``, else ``other``."""
    if ch in _CONNECTORS:
        return "connector"
    return "run" if ch.isalnum() else "other"


def _pieces(word: str) -> list[_Piece]:
    """``word`` cut into runs of letters and digits, single connectors and runs of anything else, reading
    each character once."""
    pieces: list[_Piece] = []
    start, kind = 0, ""
    for i, ch in enumerate(word):
        this = _char_kind(ch)
        if this != kind or this == "connector":
            if kind:
                pieces.append((start, i, kind))
            start, kind = i, this
    if kind:
        pieces.append((start, len(word), kind))
    return pieces


def _identifier_spans(word: str) -> list[tuple[int, int]]:
    """(start, end) of each identifier in ``word``, left to right: runs of letters and digits joined by
    single connectors, as long as they go, except letters alone joined by hyphens or colons (words:
    "self-care", "est-ce")."""
    pieces = _pieces(word)
    spans: list[tuple[int, int]] = []
    i = 0
    while i < len(pieces):
        if pieces[i][2] != "run":
            i += 1
            continue
        last = i
        while last + 2 < len(pieces) and pieces[last + 1][2] == "connector" and pieces[last + 2][2] == "run":
            last += 2
        if last > i and not _joined_words(word, pieces[i : last + 1]):
            spans.append((pieces[i][0], pieces[last][1]))
        i = last + 1
    return spans


def _joined_words(word: str, pieces: list[_Piece]) -> bool:
    """True when the runs hold no digit and every connector is a hyphen or a colon."""
    return all(
        word[start] in _JOINERS_OF_WORDS if kind == "connector" else not _has_digit(word, start, end)
        for start, end, kind in pieces
    )


def _has_digit(word: str, start: int, end: int) -> bool:
    return any(word[k].isdecimal() for k in range(start, end))


def _is_identifier(token: str) -> bool:
    """True when ``token`` is runs of letters and digits joined by single connectors, at least two runs."""
    kinds = [kind for _, _, kind in _pieces(token)]
    return (
        len(kinds) >= 3
        and len(kinds) % 2 == 1
        and all(kind == ("run" if i % 2 == 0 else "connector") for i, kind in enumerate(kinds))
    )


def _segments(text: str) -> list[str]:
    """The query's words: identifiers whole (``bill-4821``, ``foo_bar``, ``v2.3.1``, ``2026-01-05``),
    everything else split on whitespace and punctuation.

    An identifier stays one term, searched as a phrase of its parts (the index splits it the same
    way), so "BILL-4821" finds the invoice and not every note holding "bill" or "4821".
    """
    out: list[str] = []
    for word in text.split():
        if _HAS_WIDE.search(word) is None:
            pos = 0
            for start, end in _identifier_spans(word):
                out += _split_punctuation(word[pos:start])
                out.append(word[start:end])
                pos = end
            out += _split_punctuation(word[pos:])
        else:
            out += _split_punctuation(word)
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
    """Numbers are kept ("invoice 4521", "2026年"); identifiers too when they have three letters or
    digits ("a-1" and "v2.3.1" yes, "e.g" no)."""
    if not token or token in STOP_WORDS:
        return False
    if _is_identifier(token):
        return sum(ch.isalnum() for ch in token) >= 3 or any(ch.isdigit() for ch in token)
    if token.isascii() and _ASCII_LETTERS.fullmatch(token) and len(token) < MIN_LATIN_LETTERS:
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


def quoted_phrases(terms: Iterable[str]) -> list[str]:
    """``terms`` as quoted FTS5 phrases, without duplicates (a dict, not a scan of a list), in order."""
    return list(dict.fromkeys(q for q in map(_quote, terms) if q is not None))


def fts_phrases(raw: str) -> list[str]:
    """The query's terms as quoted FTS5 phrases, without duplicates, in order."""
    return quoted_phrases(fts_terms(raw))


def build_fts_query(raw: str, *, operator: str = "AND") -> str | None:
    """A MATCH expression joining the quoted terms of ``raw`` with ``operator``; None when empty.

    OpenClaw's ``buildFtsQuery`` (AND); the search itself ORs the phrases (``fts_search``)."""
    if operator not in ("AND", "OR"):
        raise ValueError(f"FTS operator must be AND or OR, not {operator!r}")
    quoted = fts_phrases(raw)
    return f" {operator} ".join(quoted) if quoted else None
