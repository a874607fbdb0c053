"""Where the Redis URLs come from: SPECDEC_REDIS_URL or a file (a mounted secret), and the operator's
URL that approvals go through (docs/configuration.md, docs/deployment.md "Redis users")."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from services.app.context import approver_settings
from services.runtime.settings import RuntimeSettings

SERVICES = "redis://specdec-services:s3cret@redis:6379/0"
OPERATOR = "redis://specdec-operator:0p3rator@redis:6379/0"


@pytest.fixture(autouse=True)
def _no_redis_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    # `make test` exports the test Redis's URLs; these tests set the sources themselves.
    for name in ("SPECDEC_REDIS_URL", "SPECDEC_REDIS_URL_FILE", "SPECDEC_OPERATOR_REDIS_URL"):
        monkeypatch.delenv(name, raising=False)


def test_the_url_file_replaces_the_url(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "services.url").write_text(f"  {SERVICES}\n")
    monkeypatch.setenv("SPECDEC_REDIS_URL_FILE", str(tmp_path / "services.url"))
    assert RuntimeSettings().redis_url == SERVICES


@pytest.mark.parametrize(("content", "expected"), [(None, "cannot be read"), ("\n", "is empty")])
def test_a_missing_or_empty_url_file_is_refused_in_one_line(tmp_path: Path, content: str | None, expected: str) -> None:
    path = tmp_path / "services.url"
    if content is not None:
        path.write_text(content)
    with pytest.raises(ValidationError, match=expected) as caught:
        RuntimeSettings(redis_url_file=str(path))
    assert str(path) in str(caught.value)


def test_the_url_and_the_url_file_together_are_refused(tmp_path: Path) -> None:
    (tmp_path / "services.url").write_text(SERVICES)
    with pytest.raises(ValidationError, match="both set"):
        RuntimeSettings(redis_url="redis://127.0.0.1:6379/0", redis_url_file=str(tmp_path / "services.url"))


def test_approvals_go_through_the_operator_url_when_one_is_set() -> None:
    services = RuntimeSettings(redis_url=SERVICES)
    assert approver_settings(services) is services
    both = RuntimeSettings(redis_url=SERVICES, operator_redis_url=OPERATOR, stream_prefix="p")
    approver = approver_settings(both)
    assert approver.redis_url == OPERATOR and approver.stream_prefix == "p"
    assert both.redis_url == SERVICES  # the services' settings are left as they are
