"""Secret redaction for text that is about to be indexed or shown from a transcript.

Session transcripts are indexed for memory search (reference §5), and OpenClaw passes each message
through a redactor first. A secret that reaches the index can be found again by anyone who can search
it, and comes back in snippets. So every pattern here removes the whole secret and keeps at most a
short, non-secret hint of what it was (``sk-…[redacted]``, ``AKIA…[redacted]``), never a character of
the secret itself.

The patterns are deliberately specific (known key prefixes, ``key=value`` shapes, URL credentials,
PEM blocks): redacting prose would make transcripts unsearchable. The function is pure and
idempotent (``redact_secrets(redact_secrets(t)) == redact_secrets(t)``).
"""

from __future__ import annotations

import re
from collections.abc import Callable

REDACTED = "[REDACTED]"

_Rule = tuple[re.Pattern[str], Callable[[re.Match[str]], str]]


def _hint(prefix: str) -> Callable[[re.Match[str]], str]:
    return lambda _m: f"{prefix}…[redacted]"


def _keep_group(group: int, replacement: str = REDACTED) -> Callable[[re.Match[str]], str]:
    """Keep the label (e.g. ``password=``) and replace only the value."""
    return lambda m: m.group(group) + replacement


def _mixed_token(body: str) -> bool:
    """Random-looking: letters and digits both present (keeps ``sk-learn-tutorial`` words intact)."""
    return any(c.isdigit() for c in body) and any(c.isalpha() for c in body)


def _sk_key(m: re.Match[str]) -> str:
    return "sk-…[redacted]" if _mixed_token(m.group(1)) else m.group(0)


_NOT_WORD_BEFORE = r"(?<![A-Za-z0-9_\-])"

_RULES: tuple[_Rule, ...] = (
    # PEM private key blocks (newlines may already be collapsed to spaces by the flattener).
    (
        re.compile(r"-----BEGIN[A-Z0-9 ]*PRIVATE KEY-----[\s\S]*?(?:-----END[A-Z0-9 ]*PRIVATE KEY-----|$)"),
        lambda _m: "[REDACTED PRIVATE KEY]",
    ),
    # scheme://user:password@host -> scheme://user:***@host
    (
        re.compile(r"\b([a-zA-Z][a-zA-Z0-9+.\-]*://[^\s/:@]+):([^\s/@]+)@"),
        lambda m: f"{m.group(1)}:***@",
    ),
    # Anthropic before OpenAI: both start with sk-.
    (re.compile(_NOT_WORD_BEFORE + r"sk-ant-[A-Za-z0-9_\-]{8,}"), _hint("sk-ant-")),
    (re.compile(_NOT_WORD_BEFORE + r"sk-((?:proj-)?[A-Za-z0-9_\-]{20,})"), _sk_key),
    # Stripe secret and restricted keys (publishable pk_ keys are public by design).
    (
        re.compile(_NOT_WORD_BEFORE + r"([sr]k_(?:live|test)_)[A-Za-z0-9]{10,}"),
        lambda m: f"{m.group(1)}…[redacted]",
    ),
    (re.compile(r"\b(AKIA|ASIA)[0-9A-Z]{16}\b"), lambda m: f"{m.group(1)}…[redacted]"),
    (re.compile(r"\bgithub_pat_[A-Za-z0-9_]{20,}"), _hint("github_pat_")),
    (re.compile(r"\b(gh[pousr]_)[A-Za-z0-9]{20,}"), lambda m: f"{m.group(1)}…[redacted]"),
    (re.compile(r"\b(xox[abposr]-)[A-Za-z0-9\-]{10,}"), lambda m: f"{m.group(1)}…[redacted]"),
    (re.compile(r"\bAIza[0-9A-Za-z_\-]{30,}"), _hint("AIza")),
    # JSON Web Tokens: three base64url parts, the first one a JSON header ("eyJ").
    (
        re.compile(r"\beyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}"),
        lambda _m: "[REDACTED JWT]",
    ),
    # Authorization headers and bare bearer tokens.
    (
        re.compile(r"(?i)\b(authorization\s*[:=]\s*(?:bearer|basic|token)?\s*)[A-Za-z0-9\-._~+/]{8,}=*"),
        _keep_group(1),
    ),
    (re.compile(r"(?i)\b(bearer\s+)[A-Za-z0-9\-._~+/]{16,}=*"), _keep_group(1)),
    # password=..., passwd: ..., "password": "..."
    (
        re.compile(
            r"""(?i)\b((?:password|passwd|passphrase|pwd)["']?\s*[:=]\s*)("[^"]*"|'[^']*'|[^\s"',;]+)"""
        ),
        _keep_group(1),
    ),
    # api_key=..., "apiKey": "...", client_secret: ..., access_token=...
    (
        re.compile(
            r"""(?i)\b((?:api[_\-]?key|apikey|secret[_\-]?key|client[_\-]?secret|access[_\-]?token"""
            r"""|auth[_\-]?token|secret_access_key|private[_\-]?key)["']?\s*[:=]\s*["']?)"""
            r"""([^\s"',;]{6,})"""
        ),
        _keep_group(1),
    ),
)


# For each rule, lower-case substrings at least one of which every match contains. Most messages hold
# none of them, so a rule's regex runs only where it can match (indexing a transcript redacts every
# message; running all the regexes on each cost about 140 µs a message).
_TRIGGERS: tuple[tuple[str, ...], ...] = (
    ("private key",),
    ("://",),
    ("sk-ant-",),
    ("sk-",),
    ("k_live_", "k_test_"),
    ("akia", "asia"),
    ("github_pat_",),
    ("ghp_", "gho_", "ghu_", "ghs_", "ghr_"),
    ("xox",),
    ("aiza",),
    ("eyj",),
    ("authorization",),
    ("bearer",),
    ("password", "passwd", "passphrase", "pwd"),
    ("key", "secret", "token"),
)
assert len(_TRIGGERS) == len(_RULES)


def redact_secrets(text: str) -> str:
    """``text`` with API keys, tokens, passwords and private keys replaced by redaction markers."""
    if not text:
        return text
    lowered = text.lower()
    for (pattern, replace), triggers in zip(_RULES, _TRIGGERS, strict=True):
        if any(t in lowered for t in triggers):
            text = pattern.sub(replace, text)
            lowered = text.lower()
    return text
