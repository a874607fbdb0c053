"""Shared fixtures: a real Redis (the machine's, or one the tests start), a
unique stream prefix per test, settings pointing at both, and test-owned
redis-server instances for crash tests."""

from __future__ import annotations

import os
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from services.runtime.settings import RuntimeSettings
from tests.support.redis_server import RedisServer

ROOT = Path(__file__).resolve().parent.parent


def _ensure_redis(*args: str) -> str:
    """infra/bin/ensure-redis's URL (the local ACL'd Redis unless SPECDEC_REDIS_URL answers)."""
    out = subprocess.run([str(ROOT / "infra/bin/ensure-redis"), *args], capture_output=True, text=True, check=True)
    return out.stdout.strip()


@pytest.fixture(scope="session")
def redis_url() -> str:
    """The services' URL: SPECDEC_REDIS_URL when it answers; otherwise the local Redis that
    infra/bin/ensure-redis starts, with its ACL users."""
    url = os.environ.get("SPECDEC_REDIS_URL")
    if url:
        try:
            if redis.Redis.from_url(url).ping():
                return url
        except redis.RedisError:
            pass
    return _ensure_redis()


@pytest.fixture(scope="session")
def operator_redis_url(redis_url: str) -> str:
    """The operator's URL, the one allowed to write the approval stream: SPECDEC_OPERATOR_REDIS_URL when set;
    else what infra/bin/ensure-redis --operator names for the Redis in use (the local one's operator, or
    SPECDEC_REDIS_URL itself for a Redis of one's own, whose users are its operator's)."""
    if os.environ.get("SPECDEC_OPERATOR_REDIS_URL"):
        return os.environ["SPECDEC_OPERATOR_REDIS_URL"]
    return _ensure_redis("--operator")


@pytest.fixture
def prefix(redis_url: str) -> Iterator[str]:
    """A stream/key prefix of this test alone; its keys are deleted afterwards."""
    name = f"t{uuid.uuid4().hex[:10]}"
    yield name
    client = redis.Redis.from_url(redis_url)
    keys = list(client.scan_iter(match=f"{name}*", count=1000))
    if keys:
        client.delete(*keys)
    client.close()


@pytest.fixture
def settings(redis_url: str, operator_redis_url: str, prefix: str, tmp_path: Path) -> RuntimeSettings:
    return RuntimeSettings(
        redis_url=redis_url,
        redis_url_file="",
        operator_redis_url=operator_redis_url,
        stream_prefix=prefix,
        bundle_root=tmp_path / "bundles",
        instance=f"test-{uuid.uuid4().hex[:6]}",
        reclaim_idle_ms=1500,
        reclaim_poll_ms=100,
        read_block_ms=100,
        max_deliveries=3,
        shutdown_grace_s=2.0,
    )


@pytest.fixture
def settings_env(settings: RuntimeSettings) -> dict[str, str]:
    """The same settings as environment variables, for child processes."""
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT)
    for name, value in settings.model_dump().items():
        env[f"SPECDEC_{name.upper()}"] = str(value)
    return env


@pytest.fixture
def redis_server(tmp_path: Path) -> Iterator[RedisServer]:
    """A redis-server of this test's own (AOF on, appendfsync always)."""
    server = RedisServer(tmp_path / "redis")
    server.start()
    yield server
    server.stop()
