"""The perf runner on a fake bench package: table, JSON files, crash isolation, exit status."""

from __future__ import annotations

import json
import platform
import uuid
from pathlib import Path

import pytest

from tests.perf import runner
from tests.perf.bench_hop import parse_redis_benchmark_csv, percentile

GOOD = '''
from tests.perf.runner import make_row

def bench(ctx):
    (ctx.workdir / "scratch.txt").write_text("used")
    n = 10 if ctx.quick else 1000
    return [
        make_row("good.rate", float(n), "items/s", goal=">= 5 items/s", passed=n >= 5,
                 reference="a reference loop", reference_value=4.0),
        make_row("good.slow", 3.0, "s", goal="<= 1 s", passed=False),
        {"name": "good.workdir", "value": float(ctx.workdir.is_dir()), "unit": "bool", "reference": None,
         "reference_value": None, "ratio": None, "goal": "scratch folder exists", "passed": True,
         "redis_url": ctx.redis_url},
    ]
'''
BOOM = '''
def bench(ctx):
    raise RuntimeError("boom: the bench broke")
'''
MALFORMED = '''
def bench(ctx):
    return [{"name": "bad.row", "value": 1.0}]
'''


@pytest.fixture
def fake_package(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    name = f"fakeperf_{uuid.uuid4().hex[:8]}"
    package = tmp_path / "src" / name
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "bench_good.py").write_text(GOOD)
    (package / "bench_boom.py").write_text(BOOM)
    (package / "bench_malformed.py").write_text(MALFORMED)
    (package / "helper.py").write_text("raise AssertionError('not a bench: must not be imported')\n")
    monkeypatch.syspath_prepend(str(tmp_path / "src"))
    monkeypatch.setenv("SPECDEC_REDIS_URL", "redis://example.invalid:6379/3")
    return name


def test_discover_finds_only_bench_modules(fake_package: str) -> None:
    assert runner.discover(fake_package) == ["bench_boom", "bench_good", "bench_malformed"]


def test_run_reports_crashes_as_rows_and_keeps_going(fake_package: str, tmp_path: Path, capsys) -> None:
    out = tmp_path / "results"
    rc = runner.main(["--quick", "--out", str(out)], package=fake_package)
    assert rc == 1, "a crashed bench makes the run exit non-zero"

    printed = capsys.readouterr().out
    header = printed.splitlines()[0].split()
    assert header == list(runner.TABLE_COLUMNS)
    assert "good.rate" in printed and "good.slow" in printed
    assert "bench_boom: CRASHED: RuntimeError: boom: the bench broke" in printed
    assert "bench_malformed: CRASHED: BenchError" in printed

    latest = json.loads((out / "latest.json").read_text())
    stamped = [p for p in out.glob("*.json") if p.name != "latest.json"]
    assert len(stamped) == 1 and json.loads(stamped[0].read_text()) == latest
    assert latest["quick"] is True
    assert latest["machine"]["python"] == platform.python_version()
    assert latest["machine"]["cpu_count"] >= 1
    assert {"platform", "git_revision", "cpus_usable"} <= set(latest["machine"])

    rows = {row["name"]: row for row in latest["rows"]}
    rate = rows["good.rate"]
    assert rate["value"] == 10.0, "quick mode reached the bench"
    assert rate["ratio"] == pytest.approx(2.5) and rate["passed"] is True and rate["bench"] == "bench_good"
    assert rows["good.slow"]["passed"] is False and rows["good.slow"]["ratio"] is None
    assert rows["good.workdir"]["value"] == 1.0
    assert rows["good.workdir"]["redis_url"] == "redis://example.invalid:6379/3"
    for crashed, reason in (("bench_boom", "RuntimeError"), ("bench_malformed", "lacks")):
        assert rows[crashed]["passed"] is False and rows[crashed]["value"] is None
        assert reason in rows[crashed]["error"]
    assert set(runner.ROW_KEYS) <= set(rows["bench_boom"])
    records = {record["bench"]: record for record in latest["benches"]}
    assert records["bench_good"]["crashed"] is False and records["bench_boom"]["crashed"] is True


def test_missed_goals_do_not_fail_the_run(fake_package: str, tmp_path: Path, capsys) -> None:
    rc = runner.main(["--only", "good", "--out", str(tmp_path / "r")], package=fake_package)
    assert rc == 0
    latest = json.loads((tmp_path / "r" / "latest.json").read_text())
    assert [row["name"] for row in latest["rows"]] == ["good.rate", "good.slow", "good.workdir"]
    assert latest["rows"][0]["value"] == 1000.0 and latest["quick"] is False
    assert "NO" in capsys.readouterr().out, "a missed goal shows in the table"


def test_unknown_only_name_is_a_usage_error(fake_package: str, tmp_path: Path, capsys) -> None:
    rc = runner.main(["--only", "bench_nosuch", "--out", str(tmp_path / "r")], package=fake_package)
    assert rc == 2
    assert "bench_nosuch" in capsys.readouterr().err
    assert not (tmp_path / "r").exists()


def test_make_row_ratio() -> None:
    assert runner.make_row("x", 6.0, "u", goal="g", passed=None, reference_value=3.0)["ratio"] == 2.0
    assert runner.make_row("x", 6.0, "u", goal="g", passed=None, reference_value=0.0)["ratio"] is None
    assert runner.make_row("x", 6.0, "u", goal="g", passed=None)["ratio"] is None


def test_percentile_is_nearest_rank() -> None:
    values = [float(v) for v in range(1, 101)]
    assert percentile(values, 50) == 50.0
    assert percentile(values, 99) == 99.0
    assert percentile([3.0, 1.0, 2.0], 50) == 2.0
    with pytest.raises(ValueError):
        percentile([], 50)


def test_parse_redis_benchmark_csv() -> None:
    text = (
        '"test","rps","avg_latency_ms","min_latency_ms","p50_latency_ms","p95_latency_ms","p99_latency_ms","max_latency_ms"\n'
        '"XADD p:bench * f v","10309.28","0.090","0.024","0.039","0.079","2.247","5.639"\n'
    )
    assert parse_redis_benchmark_csv(text) == {"rps": 10309.28, "p50_ms": 0.039, "p99_ms": 2.247}
