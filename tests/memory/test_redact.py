"""Secrets never reach the index: each kind is replaced, prose and hints survive."""

from __future__ import annotations

import pytest

from sessionmem.memory.sync.redact import redact_secrets

SECRETS = [
    # (text, the secret that must disappear, what should remain)
    ("my key is sk-proj-abc123DEF456ghi789JKL012mno", "abc123DEF456ghi789JKL012mno", "sk-…[redacted]"),
    ("sk-ant-api03-AbCdEf123456_xyz-QRS", "api03-AbCdEf123456_xyz", "sk-ant-…[redacted]"),
    ("aws AKIAIOSFODNN7EXAMPLE in env", "IOSFODNN7EXAMPLE", "AKIA…[redacted]"),
    (
        "token ghp_abcdefghijklmnopqrstuvwxyz0123456789",
        "abcdefghijklmnopqrstuvwxyz0123456789",
        "ghp_…[redacted]",
    ),
    ("github_pat_11ABCDEFG0123456789_abcdefghijklmnop", "11ABCDEFG0123456789", "github_pat_…[redacted]"),
    ("slack xoxb-1234567890-abcdefghij", "1234567890-abcdefghij", "xoxb-…[redacted]"),
    ("AIzaSyA-1234567890abcdefghijklmnopqrstuv", "SyA-1234567890abcdefghijklmnopqrstuv", "AIza…[redacted]"),
    ("stripe sk_live_51HabcDEFghiJKLmnoPQR", "51HabcDEFghiJKLmnoPQR", "sk_live_…[redacted]"),
    ('api_key = "abcd1234efgh"', "abcd1234efgh", 'api_key = "[REDACTED]"'),
    ('{"apiKey": "abcd1234efgh5678"}', "abcd1234efgh5678", '"apiKey": "[REDACTED]"'),
    ("client_secret: Zm9vYmFyYmF6cXV4", "Zm9vYmFyYmF6cXV4", "client_secret: [REDACTED]"),
    (
        'curl -H "Authorization: Bearer abcdef0123456789abcdef"',
        "abcdef0123456789abcdef",
        "Authorization: Bearer [REDACTED]",
    ),
    ("use Bearer Zm9vYmFyMTIzNDU2Nzg5MA== here", "Zm9vYmFyMTIzNDU2Nzg5MA", "Bearer [REDACTED] here"),
    (
        "DATABASE_URL=postgres://admin:s3cr3tP4ss@db.internal:5432/app",
        "s3cr3tP4ss",
        "postgres://admin:***@db.internal:5432/app",
    ),
    ("login with password=hunter2 today", "hunter2", "password=[REDACTED] today"),
    ("passwd: swordfish", "swordfish", "passwd: [REDACTED]"),
    (
        "-----BEGIN RSA PRIVATE KEY----- MIIEpAIBAAKCAQEA7xyz -----END RSA PRIVATE KEY----- after",
        "MIIEpAIBAAKCAQEA7xyz",
        "[REDACTED PRIVATE KEY] after",
    ),
    (
        "jwt eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c",
        "SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c",
        "[REDACTED JWT]",
    ),
]


@pytest.mark.parametrize(("text", "secret", "kept"), SECRETS)
def test_secret_is_removed_and_a_hint_kept(text: str, secret: str, kept: str) -> None:
    out = redact_secrets(text)
    assert secret not in out
    assert kept in out


@pytest.mark.parametrize(
    "text",
    [
        "we use sk-learn-tutorial-for-beginners in class",
        "the task-management board",
        "the bearer of bad news",
        "reset your password via the settings page",
        "publishable pk_live_1234567890abcdef is public",
        "see https://example.com/docs?q=1 for details",
        "",
    ],
)
def test_ordinary_text_is_left_alone(text: str) -> None:
    assert redact_secrets(text) == text


def test_redaction_is_idempotent() -> None:
    text = " ".join(t for t, _, _ in SECRETS)
    once = redact_secrets(text)
    assert redact_secrets(once) == once


def test_multiline_private_key_block() -> None:
    text = (
        "key:\n-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEA\nAAAABG5vbmU=\n"
        "-----END OPENSSH PRIVATE KEY-----\nok"
    )
    out = redact_secrets(text)
    assert "b3BlbnNzaC1rZXktdjEA" not in out and "AAAABG5vbmU" not in out
    assert out.endswith("[REDACTED PRIVATE KEY]\nok")
