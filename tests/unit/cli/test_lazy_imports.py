"""Every `specdec` command imports only what it runs: a CLI that starts at once.

Building the parser registers every command, the optional step commands
included; it must not load a step's heavy modules (the gate's scipy.stats, the
publisher's matplotlib, the profiler's redaction detectors), nor the broker.
Each check runs in a fresh interpreter: this test process has long imported
everything. tests/perf/bench_cli.py times the commands.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path
from unittest import mock

import pytest

ROOT = Path(__file__).resolve().parents[3]

# What a command that does not run them must not load: ~0.2 to 1 s of imports each.
HEAVY = ("scipy", "matplotlib", "numpy", "faststream", "httpx", "detect_secrets")


def loaded_after(code: str) -> set[str]:
    """The top-level packages in sys.modules after `code` ran in a fresh interpreter."""
    probe = f"{code}\nimport json, sys\nprint(json.dumps(sorted({{name.split('.')[0] for name in sys.modules}})))"
    done = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return set(json.loads(done.stdout.strip().splitlines()[-1]))


def test_building_the_parser_loads_no_heavy_module():
    loaded = loaded_after("import services.cli.main\nservices.cli.main.build_parser()")
    assert "services" in loaded  # the probe did import the CLI
    assert loaded & set(HEAVY) == set()


def test_help_loads_no_heavy_module_nor_the_log_setup():
    code = (
        "import contextlib, io\nfrom services.cli.main import main\n"
        "with contextlib.redirect_stdout(io.StringIO()) as out:\n"
        "    try:\n        main(['--help'])\n    except SystemExit as exc:\n        assert exc.code == 0, exc.code\n"
        "assert 'usage: specdec' in out.getvalue() and 'gate' in out.getvalue(), out.getvalue()"
    )
    loaded = loaded_after(code)
    # --help logs nothing, so it does not wait for structlog either.
    assert loaded & {*HEAVY, "structlog"} == set()


def test_redis_commands_load_no_step_module():
    # status, watch and dlq run services.app.runs.ops over services.app.context; faststream
    # loads only when a broker is made (a publish) or an entry is decoded.
    loaded = loaded_after("import services.app.context, services.app.runs.ops")
    assert loaded & {"scipy", "matplotlib", "numpy", "httpx", "detect_secrets", "faststream"} == set()


def test_profile_help_still_names_every_bundled_shape(monkeypatch: pytest.MonkeyPatch):
    from services.cli.main import build_parser
    from services.shared.text.shapes import SHAPES

    monkeypatch.setenv("COLUMNS", "1000")  # one line per option: no wrap inside a name like very-long
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    text = sub.choices["profile"].format_help()
    assert f"bundled workload shapes ({', '.join(SHAPES)}); all of them" in text
    assert "%(" not in text


def test_a_step_command_module_that_is_not_built_is_left_out():
    from services.cli import main

    with mock.patch.object(main, "_OPTIONAL_COMMANDS", (*main._OPTIONAL_COMMANDS, "services.cli.commands.nosuch")):
        parser = main.build_parser()
    assert parser.parse_args(["gate", "--baseline", "b", "--candidate", "c", "--objective", "tpot",
                              "--acceptance-floor", "0.5"]).command == "gate"
    with mock.patch.object(main, "_OPTIONAL_COMMANDS", ("services.cli.commands.nosuch",)):
        with pytest.raises(SystemExit):
            main.build_parser().parse_args(["gate"])


def test_step_commands_load_their_use_case_only_when_run():
    # gate and report import their use case (services/app/runs/gate.py, report.py) inside the handler:
    # the command modules themselves load neither the gate's scipy nor the publisher's matplotlib.
    loaded = loaded_after("from services.cli.commands import gate, report, validate")
    assert loaded & set(HEAVY) == set()
    import services.app.runs.gate
    import services.app.runs.report
    import services.gate
    import services.publisher.pipeline

    assert services.app.runs.gate.decide is services.gate.decide
    assert services.app.runs.report.render_run is services.publisher.pipeline.render_run


def test_step_names_have_one_value():
    import contracts.events
    import contracts.steps

    assert contracts.events.STEPS == contracts.steps.STEPS


def test_the_metrics_sdk_is_marked_absent_only_in_a_process_that_has_not_loaded_redis():
    import importlib.util

    import redis  # noqa: F401  (this test process, like any host calling main() in-process)

    from services.cli import main

    before = sys.modules.get(main._METRICS_SDK, "unset")
    main._without_metrics_sdk()
    assert sys.modules.get(main._METRICS_SDK, "unset") is before  # left alone: the host may need the SDK
    # A fresh process, as `specdec status` is: redis-py then loads without the SDK ...
    assert not _sdk_loaded("from services.cli import main\nmain._without_metrics_sdk()\nimport redis.asyncio")
    # ... which it loads otherwise, wherever vLLM installed it.
    if importlib.util.find_spec("opentelemetry.sdk") is not None:
        assert _sdk_loaded("import redis.asyncio")


def _sdk_loaded(code: str) -> bool:
    probe = f"{code}\nimport sys\nprint(any(m and n.startswith('opentelemetry.sdk') for n, m in sys.modules.items()))"
    done = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip().splitlines()[-1] == "True"
