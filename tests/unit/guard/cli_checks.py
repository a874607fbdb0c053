"""One checker per `specdec` argument: the command line with and without the
change, and what the command then does.

The observable is the call the subcommand makes into the code that does the
work (recorded with its arguments, output streams left out), its exit status
and what it prints. Offline commands (profile, corpus, gate) call through to
the real code on real files; commands that talk to Redis or to a publish
target stop at their entry point, whose own tests cover the rest.
"""

from __future__ import annotations

import contextlib
import io
from collections.abc import Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any
from unittest import mock

from services.cli.main import build_parser
from services.runtime.errors import SpecdecError
from tests.unit.guard.context import RUN, TRAFFIC, Ctx

OTHER_RUN = "toy-20261130-020202-fedcba"


def _plain(value: Any) -> Any:
    if hasattr(value, "write"):
        return "<stream>"  # a fresh capture per invocation: not an argument the operator set
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value if isinstance(value, (str, int, float, bool, type(None), Path)) else type(value).__name__


def _spies(calls: list[tuple[str, Any, Any]]) -> dict[str, Callable[..., Any]]:
    """target -> replacement; `through` ones call the real function after recording."""

    def record(name: str, result: Any = None, through: Callable[..., Any] | None = None, is_async: bool = False):
        def sync(*args: Any, **kwargs: Any) -> Any:
            # publish's idempotency key is the time of the call, not an operator's setting
            kept = {k: _plain(v) for k, v in sorted(kwargs.items()) if k != "key"}
            calls.append((name, _plain(list(args)), kept))
            return through(*args, **kwargs) if through is not None else result

        async def coro(*args: Any, **kwargs: Any) -> Any:
            return sync(*args, **kwargs)

        return coro if is_async else sync

    import services.corpus.build as corpus_build
    import services.profiler.profile as profiler
    from services.cli import gate_cmd

    status = mock.Mock(halted=False)
    status.model_dump_json.return_value = "{}"
    outcome = mock.Mock(report=mock.Mock(plots=[]), refs=[],
                        summary=mock.Mock(draft=False, draft_reasons=[], levers=["-"]))

    @asynccontextmanager
    async def connect(settings: Any = None):
        yield "cli"

    return {
        "services.cli.context.connect": connect,
        "services.cli.submit.submit": record("submit", "toy-run", is_async=True),
        "services.cli.ops.approve": record("approve", mock.Mock(event_id="e", plan_sha256s=[]), is_async=True),
        "services.cli.ops.request": record("request", "e", is_async=True),
        "services.cli.ops.status": record("status", status, is_async=True),
        "services.cli.ops.render_status": record("render_status", "status text"),
        "services.cli.ops.watch": record("watch", None, is_async=True),
        "services.cli.ops.dlq_list": record("dlq_list", [], is_async=True),
        "services.cli.ops.dlq_replay": record("dlq_replay", "stream", is_async=True),
        "services.cli.up.up": record("up", 0),
        "services.cli.export.export": record("export", []),
        "services.cli.report_cmd.render_run": record("render_run", outcome),
        "services.cli.report_cmd.render_copy": record("render_copy", (outcome.report, outcome.summary, [])),
        "services.cli.report_cmd.publish_run": record("publish_run", None, is_async=True),
        "services.cli.report_cmd.render": record("render_publication", "published"),
        "services.cli.plan_cmd.show_plan": record("show_plan", 0),
        "services.profiler.profile.profile_traffic": record("profile_traffic", through=profiler.profile_traffic),
        "services.profiler.profile.profile_shapes": record("profile_shapes", through=profiler.profile_shapes),
        "services.corpus.build.build_corpus": record("build_corpus", through=corpus_build.build_corpus),
        "services.cli.gate_cmd.decide": record("decide", through=gate_cmd.decide),
    }


def invoke(argv: list[str]) -> Any:
    """What `specdec ARGV` calls, prints and returns."""
    calls: list[tuple[str, Any, Any]] = []
    out = io.StringIO()
    with contextlib.ExitStack() as stack:
        for target, replacement in _spies(calls).items():
            stack.enter_context(mock.patch(target, replacement))
        stack.enter_context(contextlib.redirect_stdout(out))
        stack.enter_context(contextlib.redirect_stderr(io.StringIO()))
        args = build_parser().parse_args(argv)
        try:
            rc: Any = args.func(args)
        except SpecdecError as exc:
            rc = f"{type(exc).__name__}: {exc}"
    return calls, rc, out.getvalue()


def cli_checks(ctx: Ctx) -> dict[str, tuple[list[str], list[str]]]:
    """argument -> (base argv, changed argv)."""
    t = ctx.tmp
    other_traffic = str(ctx.traffic_other)
    profile = t / "cli-PROFILE.json"
    profile.write_bytes(ctx.profile)
    other_profile = t / "cli-PROFILE-2.json"
    other_profile.write_bytes(ctx.profile)
    _gate_files(t)
    prof = ["profile", "--in", str(TRAFFIC), "--out", str(t / "p.json")]
    corp = ["corpus", "--profile", str(profile), "--traffic", str(TRAFFIC), "--out", str(t / "c.jsonl")]
    gate = ["gate", "--baseline", str(t / "standing/*.json"), "--candidate", str(t / "ngram/*.json"),
            "--objective", "tpot", "--acceptance-floor", "0.5"]
    pub = ["publish", RUN, "--target", "file:///tmp/specdec-guard-published"]

    def swap(argv: list[str], flag: str, value: str) -> list[str]:
        i = argv.index(flag)
        return [*argv[: i + 1], value, *argv[i + 2 :]]

    return {
        "submit <campaign>": (["submit", "a.yaml"], ["submit", "b.yaml"]),
        "approve <run_id>": (["approve", RUN], ["approve", OTHER_RUN]),
        "approve --i-understand-this-mutates-cluster": (["approve", RUN],
                                                        ["approve", RUN, "--i-understand-this-mutates-cluster"]),
        "request <step>": (["request", "bench", RUN], ["request", "gate", RUN]),
        "request <run_id>": (["request", "bench", RUN], ["request", "bench", OTHER_RUN]),
        "request --input": (["request", "bench", RUN],
                            ["request", "bench", RUN, "--input", f"training.output=bundle://{OTHER_RUN}/training/output"]),
        "request --reason": (["request", "bench", RUN], ["request", "bench", RUN, "--reason", "re-bench"]),
        "watch <run_id>": (["watch"], ["watch", RUN]),
        "watch --from-start": (["watch"], ["watch", "--from-start"]),
        "watch --timeout": (["watch"], ["watch", "--timeout", "5"]),
        "status <run_id>": (["status", RUN], ["status", OTHER_RUN]),
        "status --json": (["status", RUN], ["status", RUN, "--json"]),
        "dlq list --json": (["dlq", "list"], ["dlq", "list", "--json"]),
        "dlq replay <dead_letter_id>": (["dlq", "replay", "1-0"], ["dlq", "replay", "2-0"]),
        "up <services>": (["up"], ["up", "profiler"]),
        "contracts export <directory>": (["contracts", "export", "a"], ["contracts", "export", "b"]),
        "profile --in": (prof, swap(prof, "--in", other_traffic)),
        "profile --aa-shapes": (["profile", "--aa-shapes", "short", "--out", str(t / "p.json")],
                                ["profile", "--aa-shapes", "long", "--out", str(t / "p.json")]),
        "profile --out": (prof, swap(prof, "--out", str(t / "p2.json"))),
        "profile --tokenizer": (prof, [*prof, "--tokenizer", str(t / "no-tokenizer")]),
        "profile --reject-threshold": (prof, [*prof, "--reject-threshold", "0.5"]),
        "profile --sample-cap": (prof, [*prof, "--sample-cap", "10"]),
        "corpus --profile": (corp, swap(corp, "--profile", str(other_profile))),
        "corpus --traffic": (corp, swap(corp, "--traffic", other_traffic)),
        "corpus --out": (corp, swap(corp, "--out", str(t / "c2.jsonl"))),
        "corpus --tokenizer": (corp, [*corp, "--tokenizer", str(t / "no-tokenizer")]),
        "corpus --size": (corp, [*corp, "--size", "40"]),
        "corpus --heldout-share": (corp, [*corp, "--heldout-share", "0.3"]),
        "corpus --seed": (corp, [*corp, "--seed", "7"]),
        "corpus --max-model-len": (corp, [*corp, "--max-model-len", "64"]),
        "gate --baseline": (gate, swap(gate, "--baseline", str(t / "standing2/*.json"))),
        "gate --candidate": (gate, swap(gate, "--candidate", f"fast={t / 'ngram/*.json'}")),
        "gate --objective": (gate, swap(gate, "--objective", "ttft")),
        "gate --acceptance-floor": (gate, swap(gate, "--acceptance-floor", "0.9")),
        "gate --acceptance-length-floor": (gate, [*gate[:-2], "--acceptance-length-floor", "3.5"]),
        "gate --accuracy-floor": (gate, [*gate, "--accuracy-floor", "0.9"]),
        "gate --min-trials": (gate, [*gate, "--min-trials", "5"]),
        "gate --out": (gate, [*gate, "--out", str(t / "DECISION.json")]),
        "report <run_id>": (["report", RUN], ["report", OTHER_RUN]),
        "report --out": (["report", RUN], ["report", RUN, "--out", str(t / "report-copy")]),
        "publish <run_id>": (pub, [pub[0], OTHER_RUN, *pub[2:]]),
        "publish --target": (pub, swap(pub, "--target", "https://reports.example.com/upload")),
        "publish --dry-run": ([*pub, "--i-understand-this-publishes-externally"],
                              [*pub, "--i-understand-this-publishes-externally", "--dry-run"]),
        "publish --i-understand-this-publishes-externally": (pub, [*pub, "--i-understand-this-publishes-externally"]),
        "bench plan <run_id>": (["bench", "plan", RUN], ["bench", "plan", OTHER_RUN]),
        "bench plan --json": (["bench", "plan", RUN], ["bench", "plan", RUN, "--json"]),
        "training plan <run_id>": (["training", "plan", RUN], ["training", "plan", OTHER_RUN]),
        "training plan --json": (["training", "plan", RUN], ["training", "plan", RUN, "--json"]),
    }


def _gate_files(root: Path) -> None:
    from tests.unit.gate.test_gate_cli import write_cell

    if not (root / "standing").exists():
        write_cell(root, "standing", seed=1)
        write_cell(root, "standing2", seed=3)
        write_cell(root, "ngram", factor=0.75, seed=2)


