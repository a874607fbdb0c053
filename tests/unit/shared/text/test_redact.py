"""Redaction: each kind becomes its typed placeholder; multi-line values go whole; look-alikes stay."""

from __future__ import annotations

import json
import re

import pytest
from detect_secrets.plugins.private_key import PrivateKeyDetector

from services.shared.text.detectors import KIND_CATEGORY, looks_random
from services.shared.text.redact import KINDS, PLACEHOLDERS, cut, redact, redact_value, ruleset

JWT = ("eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkpvaG4ifQ."
       "SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c")
PEM = "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA7v1x\nq2Vz9Yt0LgK3\n-----END RSA PRIVATE KEY-----"
AZURE = "Zm9vYmFy" * 10 + "Q2hlY2s="  # 88 base64 characters


def test_placeholders_are_typed_by_category() -> None:
    assert set(KINDS) == set(KIND_CATEGORY)
    for kind, placeholder in PLACEHOLDERS.items():
        assert placeholder == f"<{KIND_CATEGORY[kind]}:{kind}>"
    assert PLACEHOLDERS["aws_secret_key"] == "<SECRET:aws_secret_key>" and PLACEHOLDERS["phone"] == "<PII:phone>"
    assert "detect-secrets 1.5.0" in ruleset() and "phonenumbers" in ruleset() and "python-stdnum" in ruleset()


@pytest.mark.parametrize(
    ("kind", "secret"),
    [
        ("email", "jane.doe+billing@mail.example.co.uk"),
        ("phone", "(415) 555-0132"),
        ("phone", "+44 20 7946 0958"),
        ("phone", "+1-415-555-0132"),
        ("ip", "192.168.10.254"),
        ("ip", "2001:db8:85a3::8a2e:370:7334"),
        ("ip", "fe80:0000:0000:0000:0202:b3ff:fe1e:8329"),
        ("card", "4111 1111 1111 1111"),
        ("card", "5500-0000-0000-0004"),
        ("card", "378282246310005"),
        ("us_ssn", "123-45-6789"),
        ("iban", "DE89 3704 0044 0532 0130 00"),
        ("iban", "GB29NWBK60161331926819"),
        ("uk_nino", "AB 12 34 56 C"),
        ("national_id", "ABCPE1234F"),  # Indian PAN
        ("openai_key", "sk-proj-Ab3dEf6hIj9kLm2nOp5qRs8t"),
        ("anthropic_key", "sk-ant-api03-abcdefghijklmnop0123"),
        ("aws_access_key_id", "AKIAIOSFODNN7EXAMPLE"),
        ("github_token", "ghp_16C7e42F292c6912E7710c838347Ae178B4a"),
        ("github_token", "github_pat_11ABCDEFG0123456789_abcdefghijklmnop"),
        ("gitlab_token", "glpat-Ab3dEf6hIj9kLm2nOp5q"),
        ("slack_token", "xoxb-123456789012-123456789012-abcdefghijkl"),
        ("slack_webhook", "https://hooks.slack.com/services/T0123ABCD/B0123ABCDE/abcdefghijklmnopqrstuvwx"),
        ("stripe_key", "sk_live_4eC39HqLyjWDarjtT1zdp7dc"),
        ("huggingface_token", "hf_abcdefghijklmnopqrstuvwxyzABCDEFGH"),
        ("google_api_key", "AIzaSyA-1234567890abcdefghijklmnopqrstu"),
        ("jwt", JWT),
        ("private_key", PEM),
    ],
)
def test_each_kind_becomes_its_placeholder(kind: str, secret: str) -> None:
    text, counts = redact(f"before {secret} after")
    assert secret not in text
    assert text == f"before {PLACEHOLDERS[kind]} after"
    assert counts == {kind: 1}


@pytest.mark.parametrize(
    ("text", "expected", "counts"),
    [
        (
            "export HF_TOKEN=hf_abcdefghijklmnopqrstuvwxyzABCDEFGH",
            "export HF_TOKEN=<SECRET:huggingface_token>",
            {"huggingface_token": 1},
        ),
        ("password: hunter2", "password: <SECRET:password>", {"password": 1}),
        ('{"db": {"password": "x9Kq!mZ2pL"}}', '{"db": {"password": "<SECRET:password>"}}', {"password": 1}),
        ("[mysql]\npassword = kf&V8w.$\n", "[mysql]\npassword = <SECRET:password>\n", {"password": 1}),
        ("POSTGRES_PASSWORD=S3cr3t-Value psql", "POSTGRES_PASSWORD=<SECRET:password> psql", {"password": 1}),
        (
            f"AccountName=a;AccountKey={AZURE};EndpointSuffix=core.windows.net",
            "AccountName=a;AccountKey=<SECRET:azure_storage_key>;EndpointSuffix=core.windows.net",
            {"azure_storage_key": 1},
        ),
        (
            '"private_key_id": "0123456789abcdef0123456789abcdef01234567"',
            '"private_key_id": "<SECRET:private_key_id>"',
            {"private_key_id": 1},
        ),
        (
            "postgres://app:s3cr3tPa55@db.internal:5432/prod",
            "postgres://<SECRET:url_credentials>@db.internal:5432/prod",
            {"url_credentials": 1},
        ),
        (
            "Authorization: Bearer a1b2c3d4e5f6g7h8i9j0",
            "Authorization: Bearer <SECRET:bearer_token>",
            {"bearer_token": 1},
        ),
        (
            "Authorization: Basic YWRtaW46c3VwZXJzZWNyZXQ=",
            "Authorization: Basic <SECRET:basic_auth>",
            {"basic_auth": 1},
        ),
        ("SSN: 123456789, thanks", "SSN: <PII:us_ssn>, thanks", {"us_ssn": 1}),
        ("call me on 020 7946 0958 tomorrow", "call me on <PII:phone> tomorrow", {"phone": 1}),
        ("$ mysql -u root -p'Zq8!word' app", "$ mysql -u root -p'<SECRET:password>' app", {"password": 1}),
    ],
)
def test_secrets_in_context(text: str, expected: str, counts: dict[str, int]) -> None:
    assert redact(text) == (expected, counts)


def test_aws_secret_on_the_line_after_its_key_id() -> None:
    secret = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"  # AWS's documented example, 40 characters
    text, counts = redact(f"my keys are\nAKIAIOSFODNN7EXAMPLE\n{secret}\nwhy denied?")
    assert text == "my keys are\n<SECRET:aws_access_key_id>\n<SECRET:aws_secret_key>\nwhy denied?"
    assert counts == {"aws_access_key_id": 1, "aws_secret_key": 1}


def test_multi_line_values_are_redacted_whole() -> None:
    body = "MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7"
    pem = f"-----BEGIN PRIVATE KEY-----\n{body}\n{body[::-1]}\n-----END PRIVATE KEY-----\n"
    # inside JSON (escaped newlines), as a GCP service-account file pastes it
    pasted = json.dumps({"type": "service_account", "private_key": pem})
    out, counts = redact(pasted)
    assert body not in out and body[::-1] not in out and "BEGIN" not in out
    assert counts == {"private_key": 1} and json.loads(out)["private_key"].startswith("<SECRET:private_key>")
    # a YAML block scalar
    yaml_text = "stringData:\n  tls.key: |\n" + "\n".join("    " + line for line in pem.splitlines()) + "\nnext: 1"
    out, counts = redact(yaml_text)
    assert body not in out and out.endswith("next: 1") and counts == {"private_key": 1}
    # a key whose value is on the following indented lines
    out, counts = redact("credentials:\n  secret:\n    c2VjcmV0LXZhbHVlLTEyMzQ1Njc4\nother: x")
    assert "c2VjcmV0" not in out and out.endswith("other: x")


def test_every_private_key_header_of_detect_secrets_is_covered() -> None:
    for pattern in PrivateKeyDetector.denylist:
        header = pattern.pattern.replace("\\", "")
        text = (
            f"-----{header}-----\nQUJDREVGR0hJSktMTU5PUFFSU1RVVldYWVo=\n-----END-----"
            if header.startswith("BEGIN")
            else f"{header}: ssh-rsa\nPrivate-Lines: 1\nQUJDREVGR0hJSktMTU5PUFFSU1RVVldYWVo=\nPrivate-MAC: 0a1b"
        )
        out, counts = redact(text)
        assert "QUJDREVGR0hJSktMTU5PUFFSU1RVVldYWVo=" not in out, header
        assert counts.get("private_key") == 1, (header, out)


def test_unterminated_private_key_is_redacted_to_the_end() -> None:
    text, counts = redact("key:\n-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC")
    assert text == "key:\n<SECRET:private_key>"
    assert counts == {"private_key": 1}


@pytest.mark.parametrize(
    "text",
    [
        "order 4111111111111112 is ready",  # 16 digits failing Luhn
        "ts 20240115123045 and 1700000000000",  # outside the card networks' ranges
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
        "std::vector<int> and Foo::bar() and a[::2]",
        "MAC 00:1A:2B:3C:4D:5E",
        "the bearer of bad news carries nothing important",
        "git clone https://github.com/org/repo.git and git@github.com:org/repo.git",
        "an sk-learn pipeline and a task-list",
        "a = b @ c and x@y",
        "scores 4 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 in order",
        "commit 4b825dc642cb6eb9a060e54bf8d69288fbee4904",
        "image sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
        "id 550e8400-e29b-41d4-a716-446655440000",
        "see http://localhost:8000/v1/chat and http://127.0.0.1:8080/health and http://[::1]:9000/",
        "order ORD-2024-004512 shipped",
        "Reset your password: click the link below",
        "password = get_password()",
        'password = os.environ["DB_PASSWORD"]',
        "password: ${DB_PASSWORD}",
        "def login(user, password): return check(password=password)",
        "max_tokens: 512\ntokenizer: meta-llama/Llama-3.1-8B-Instruct",
        "ISBN 978-0-306-40615-7 and ISBN 0-306-40615-2",
        "integrity sha512-"
        + "z4PhNX7vuL3xVChQ1m2AB9Yg5AULVxXcg/SpIdNs6c5H0NE8XYXysP+DGNKHfuwvY7kxvUdBeoGlODJ6+SfaPg==",
        "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGEJVDTXmnMDTQ7ruTVYYPN0Zqlafu9jqhjMKkuTBsJ0 ops@laptop",
        "sk-xxxxxxxxxxxxxxxxxxxxxxxxxxxx and AKIAXXXXXXXXXXXXXXXX are placeholders",
        "redis://[[username]:[password]]@localhost:6379/0",
        "def register(self, pm_pass: PatternMatcherPass) -> None:",
        "    token_bytes = state_inner_size * state_elem_size",
        "[0.742004, 0.224025, 0.469180]",
    ],
)
def test_look_alikes_stay(text: str) -> None:
    assert redact(text) == (text, {})


def test_bare_dotted_quad_counts_as_an_address() -> None:
    # Documented rule: without a version marker, a valid dotted quad is an IP (loopback aside).
    assert redact("host 1.2.3.4 is up") == ("host <PII:ip> is up", {"ip": 1})
    assert redact("bind 127.0.0.1 and 0.0.0.0 and ::1") == ("bind 127.0.0.1 and 0.0.0.0 and ::1", {})


def test_entropy_rule_separates_random_keys_from_words() -> None:
    assert looks_random("1tUm636uS1yOEcfP5pvfqJ/ml36mF7AkyHsEU0IU", context=False)
    assert looks_random("Xk3pQ9vL2mN8rT5wY7zB4cF6hJ1dG0sA", context=False)
    for word in ("AbstractSingletonProxyFactoryBean", "test_should_return_404_when_user_missing",
                 "src/main/java/com/example/Service2Impl", "SGVsbG8sIFdvcmxkISBUaGlzIGlzIGEgdGVzdA==",
                 "4b825dc642cb6eb9a060e54bf8d69288fbee4904"):
        assert not looks_random(word, context=True), word


def test_counts_add_up_and_redaction_is_idempotent() -> None:
    text = ("a@b.io, c@d.io, 10.0.0.1, 4111 1111 1111 1111, 123-45-6789, (415) 555-0132, AKIAIOSFODNN7EXAMPLE, "
            "password: x9Kq!mZ")
    once, counts = redact(text)
    assert counts == {"email": 2, "ip": 1, "card": 1, "us_ssn": 1, "phone": 1, "aws_access_key_id": 1, "password": 1}
    assert redact(once) == (once, {})
    assert set(counts) <= set(KINDS)
    assert re.findall(r"<(?:SECRET|PII):[a-z_]+>", once) and "x9Kq" not in once


def test_cut_never_splits_a_placeholder() -> None:
    text = "abc <SECRET:password> tail"
    assert cut(text, 10) == "abc "
    assert cut(text, 100) == text
    assert cut(text, 3) == "abc"


def test_redact_value_walks_nested_json() -> None:
    value, counts = redact_value({"a": ["x a@b.io", {"b": "10.1.2.3"}], "n": 3, "email@x.io": None})
    assert value == {"a": ["x <PII:email>", {"b": "<PII:ip>"}], "n": 3, "email@x.io": None}
    assert counts == {"email": 1, "ip": 1}
