"""Redaction: every kind becomes its placeholder; look-alikes stay."""

from __future__ import annotations

import pytest

from services.shared.text.redact import KINDS, PLACEHOLDERS, redact, redact_value

JWT = "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkpvaG4ifQ.SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c"
PEM = "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA7v1x\nq2Vz9Yt0LgK3\n-----END RSA PRIVATE KEY-----"


@pytest.mark.parametrize(
    ("kind", "secret"),
    [
        ("email", "jane.doe+billing@mail.example.co.uk"),
        ("phone", "(415) 555-0132"),
        ("phone", "415-555-0132"),
        ("phone", "+44 20 7946 0958"),
        ("phone", "+1-415-555-0132"),
        ("ip", "192.168.10.254"),
        ("ip", "2001:db8:85a3::8a2e:370:7334"),
        ("ip", "fe80:0000:0000:0000:0202:b3ff:fe1e:8329"),
        ("ip", "::1"),
        ("card", "4111 1111 1111 1111"),
        ("card", "5500-0000-0000-0004"),
        ("card", "378282246310005"),
        ("ssn", "123-45-6789"),
        ("secret", "sk-proj-Ab3dEf6hIj9kLm2nOp5qRs8t"),
        ("secret", "sk-ant-api03-abcdefghijklmnop0123"),
        ("secret", "AKIAIOSFODNN7EXAMPLE"),
        ("secret", "ghp_16C7e42F292c6912E7710c838347Ae178B4a"),
        ("secret", "github_pat_11ABCDEFG0123456789_abcdefghijklmnop"),
        ("secret", "xoxb-123456789012-abcdefghijkl"),
        ("secret", JWT),
        ("private_key", PEM),
        ("url_with_credentials", "https://admin:hunter2@db.internal.example.com:5432/prod?x=1"),
        ("url_with_credentials", "postgres://svc:pa55@10.0.0.7/app"),
    ],
)
def test_each_kind_becomes_its_placeholder(kind: str, secret: str) -> None:
    text, counts = redact(f"before {secret} after")
    assert secret not in text
    assert text == f"before {PLACEHOLDERS[kind]} after"
    assert counts == {kind: 1}


def test_bearer_token_keeps_the_word_and_hides_the_token() -> None:
    text, counts = redact("Authorization: Bearer a1b2c3d4e5f6g7h8i9j0")
    assert text == "Authorization: Bearer <SECRET>"
    assert counts == {"secret": 1}


def test_ssn_after_keyword_without_dashes() -> None:
    text, counts = redact("SSN: 123456789, thanks")
    assert text == "SSN: <SSN>, thanks"
    assert counts == {"ssn": 1}


def test_unterminated_private_key_is_redacted_to_the_end() -> None:
    text, counts = redact("key:\n-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC")
    assert text == "key:\n<PRIVATE_KEY>"
    assert counts == {"private_key": 1}


@pytest.mark.parametrize(
    "text",
    [
        "order 4111111111111112 is ready",  # 16 digits failing Luhn
        "the skeleton key of the skeleton crew",
        "upgrade to version 1.2.3.4 today",
        "we run v10.2.0.1 in prod",
        "pin numpy==1.26.4.1 please",
        "release 2.14.0 and 3.11",
        "1.2.3.4.5 is not an address",
        "999.10.10.10 is not an address",
        "the meeting is on 2024-01-15 at 12:30:45",
        "pi is 3.14159 and e is 2.71828; 1234567 items; 42",
        "timestamp 1700000000000 and id 5551234567",
        "std::vector<int> and Foo::bar()",
        "MAC 00:1A:2B:3C:4D:5E",
        "the bearer of bad news carries nothing important",
        "git clone https://github.com/org/repo.git",
        "an sk-learn pipeline and a task-list",
        "a = b @ c and x@y",
        "scores 4 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 in order",  # Luhn-valid digits, but a list
    ],
)
def test_look_alikes_stay(text: str) -> None:
    assert redact(text) == (text, {})


def test_bare_dotted_quad_counts_as_an_address() -> None:
    # Documented rule: without a version marker, a valid dotted quad is an IP.
    assert redact("host 1.2.3.4 is up") == ("host <IP> is up", {"ip": 1})


def test_counts_add_up_and_redaction_is_idempotent() -> None:
    text = "a@b.io, c@d.io, 10.0.0.1, 4111 1111 1111 1111, 123-45-6789, (415) 555-0132, AKIAIOSFODNN7EXAMPLE"
    once, counts = redact(text)
    assert counts == {"email": 2, "ip": 1, "card": 1, "ssn": 1, "phone": 1, "secret": 1}
    assert redact(once) == (once, {})
    assert set(counts) <= set(KINDS)


def test_redact_value_walks_nested_json() -> None:
    value, counts = redact_value({"a": ["x a@b.io", {"b": "10.1.2.3"}], "n": 3, "email@x.io": None})
    assert value == {"a": ["x <EMAIL>", {"b": "<IP>"}], "n": 3, "email@x.io": None}
    assert counts == {"email": 1, "ip": 1}
