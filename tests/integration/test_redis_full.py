"""A Redis at its maxmemory refuses writes and stays up; the CLI says so in one line (issue 40, scenario 8).

A test-owned redis-server runs infra/redis.conf with a small maxmemory (the file's own limit is
too large to reach in a test). Writes past it are refused with OOM (noeviction: nothing is
evicted), reads and trimming still work, and once the space is freed the same command succeeds.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
import structlog

from services.cli.main import main
from tests.support.redis_server import RedisServer

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def full_redis(tmp_path: Path) -> Iterator[RedisServer]:
    text = "".join(line for line in (ROOT / "infra/redis.conf").read_text().splitlines(keepends=True)
                   if not line.startswith("maxmemory "))
    conf = tmp_path / "redis.conf"
    conf.write_text(text + "\nmaxmemory 4mb\n")
    server = RedisServer(tmp_path / "redis", config=conf)
    server.start()
    yield server
    server.stop()
    structlog.reset_defaults()  # main() pointed logging at the captured stderr
    logging.basicConfig(stream=sys.stderr, level=logging.WARNING, force=True)


def test_a_full_redis_refuses_writes_and_the_cli_says_so(full_redis: RedisServer, tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    for name, value in {"REDIS_URL": full_redis.url, "REDIS_URL_FILE": "", "STREAM_PREFIX": "full",
                        "BUNDLE_ROOT": str(tmp_path / "bundles"),
                        "OPERATOR_REDIS_URL": full_redis.operator_url}.items():
        monkeypatch.setenv(f"SPECDEC_{name}", value)
    client = redis.Redis.from_url(full_redis.url)
    filler = "full.profile.completed"
    with pytest.raises(redis.exceptions.OutOfMemoryError):
        for _ in range(10_000):
            client.xadd(filler, {"pad": "x" * 8192})
    assert client.ping(), "a full Redis answers; it refuses writes, it is not killed"

    code = main(["request", "profile", "full-run-1"])
    _, err = capsys.readouterr()
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert "maxmemory" in err and "Traceback" not in err
    assert client.xlen("full.profile.requested") == 0

    client.xtrim(filler, maxlen=0)  # trimming is allowed when full: it frees memory
    assert main(["request", "profile", "full-run-1"]) == 0
    assert client.xlen("full.profile.requested") == 1
    client.close()
