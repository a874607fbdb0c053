"""One checker per argument of every command line: `specdec` and its
subcommands, `specdec demo` and the container health check; the command line
with and without the change, and what the command then does.

The observable is the call the command makes into the code that does the work
(recorded with its arguments, output streams left out), its exit status and
what it prints. Offline commands (profile, corpus, gate) call through to the
real code on real files; `specdec request` runs for real up to the bus (what it
would publish is recorded: an input name no step reads must be refused before
that); commands that talk to Redis otherwise, to a publish target, start
services or probe an endpoint stop at their entry point (the demo's steps, the
health check's HTTP request), whose own tests cover the rest.

Each name a step reads as a request input (contracts/inputs.py) is a key of
its own: `specdec request --input {bench}training.output`. The CLI must pass it
on (here), and the step must read it (test_step_inputs.py).
"""

from __future__ import annotations

import contextlib
import io
import re
from collections.abc import Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any
from unittest import mock

from pydantic import ValidationError

from contracts.inputs import STEP_INPUTS
from services.cli.main import build_parser
from services.runtime.errors import SpecdecError
from tests.unit.guard.context import OTHER_RUN, RUN, TRAFFIC, Ctx


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
    import services.gate
    import services.profiler.profile as profiler
    from services.app.runs.plans import StoredPlan

    plan = StoredPlan(run_id=RUN, step="bench", file="bench/plan.json", uri=f"bundle://{RUN}/bench/plan.json",
                      sha256="0" * 64, approval="none", approval_event_id=None, approved_by=None,
                      document={"cells": ["standing"]})
    status = mock.Mock(halted=False)
    status.model_dump_json.return_value = "{}"
    outcome = mock.Mock(report=mock.Mock(plots=[]), refs=[],
                        summary=mock.Mock(draft=False, draft_reasons=[], levers=["-"]))

    @asynccontextmanager
    async def connect(settings: Any = None):
        yield _FakeCli(calls)

    def verb(name: str) -> Callable[..., Any]:
        # A workflow verb's parsed arguments are a Namespace: recorded field by field.
        async def coro(session: Any, args: Any, **kwargs: Any) -> Any:
            calls.append((name, [_plain(vars(args))], {k: _plain(v) for k, v in sorted(kwargs.items())}))
            return mock.Mock(**{"model_dump_json.return_value": "{}"})
        return coro

    return {
        "services.app.context.connect": connect,
        "services.app.campaign.submit.submit": record("submit", "toy-run", is_async=True),
        "services.app.runs.ops.approve": record(
            "approve", mock.Mock(event_id="e", plan_sha256s=[], plans=[]), is_async=True
        ),
        "services.app.runs.ops.status": record("status", status, is_async=True),
        "services.app.runs.leftovers.unowned": record("leftovers", [], is_async=True),
        "services.app.runs.leftovers.cleanup": record("cleanup", status, is_async=True),
        "services.cli.commands.cleanup.render": record("render_cleanup", "cleanup text"),
        "services.cli.main.render_status": record("render_status", "status text"),
        "services.app.runs.resume.resume": record("resume", status, is_async=True),
        "services.cli.commands.resume.render": record("render_resume", "resume text"),
        "services.app.runs.ops.watch": record("watch", None, is_async=True),
        "services.app.runs.ops.dlq_list": record("dlq_list", [], is_async=True),
        "services.app.runs.ops.dlq_replay": record("dlq_replay", "stream", is_async=True),
        "services.cli.up.up": record("up", 0),
        "services.cli.export.export": record("export", []),
        "services.app.runs.report.render_run": record("render_run", outcome),
        "services.app.runs.report.render_copy": record("render_copy", (outcome.report, outcome.summary, [])),
        "services.app.runs.report.publish_report": record("publish_report", None, is_async=True),
        "services.app.campaign.next_run.write_next": record(
            "write_next", mock.Mock(path=Path("next.yaml"), cells=(), schedule=[], prediction=(), draft="")
        ),
        "services.cli.commands.mcp.exec_server": record("exec_mcp_server"),
        "services.mcp.server.serve": record("mcp_serve", 0),
        "services.cli.commands.report.render": record("render_publication", "published"),
        "services.app.runs.plans.show_plan": record("show_plan", plan),
        "services.profiler.profile.profile_traffic": record("profile_traffic", through=profiler.profile_traffic),
        "services.profiler.profile.profile_shapes": record("profile_shapes", through=profiler.profile_shapes),
        "services.corpus.build.build_corpus": record("build_corpus", through=corpus_build.build_corpus),
        "services.app.runs.gate.decide": record("decide", through=services.gate.decide),
        "services.app.workflow.verb_calls.evidence_init": verb("evidence_init"),
        "services.app.workflow.verb_calls.campaign_init": verb("campaign_init"),
        "services.app.workflow.verb_calls.campaign_run": verb("campaign_run"),
        "services.app.workflow.verb_calls.publish": verb("publish_to_lake"),
        "services.app.campaign.validate.validate": record(
            "validate",
            mock.Mock(
                accepted=True, cells=[], warnings=[], campaign="a.yaml", **{"model_dump_json.return_value": "{}"}
            ),
        ),
    }


class _Bus:
    """What `specdec request` would publish, recorded (the event without its ID and time)."""

    def __init__(self, calls: list[tuple[str, Any, Any]]) -> None:
        self.calls = calls

    async def publish(self, event: Any) -> None:
        body = event.model_dump(mode="json", exclude={"event_id", "produced_at"})
        self.calls.append(("publish", body, {}))


class _FakeCli:
    def __init__(self, calls: list[tuple[str, Any, Any]]) -> None:
        from services.runtime.bundle.bundle import BundleStore

        self.bus = _Bus(calls)
        self.bundle = BundleStore(_INPUTS_ROOT[0], fsync=False) if _INPUTS_ROOT else None
        self.settings = mock.Mock(stream_prefix="specdec")
        self.client = None


# The bundle root `specdec request --input` reads artifacts from (set by cli_checks).
_INPUTS_ROOT: list[Path] = []


def _demo_spies(calls: list[tuple[str, Any, Any]]) -> dict[str, Any]:
    def record(name: str, result: Any = None, is_async: bool = False) -> Any:
        def sync(*args: Any, **kwargs: Any) -> Any:
            kept = {k: _plain(v) for k, v in sorted(kwargs.items())}
            calls.append((name, _plain(list(args)), kept))
            return result

        async def coro(*args: Any, **kwargs: Any) -> Any:
            return sync(*args, **kwargs)

        return coro if is_async else sync

    return {
        "services.cli.demo.ensure_target": record("ensure_target"),
        "services.cli.demo.ensure_trainer_env": record("ensure_trainer_env"),
        "services.cli.demo.start": record("start", []),
        "services.cli.demo.stop": record("stop"),
        "services.cli.demo._submit": record("submit", "toy-run", is_async=True),
        "services.cli.demo.follow_run": record("follow_run", "status", is_async=True),
        "services.cli.demo.summarize": record("summarize", 0),
    }


def _healthcheck_spies(calls: list[tuple[str, Any, Any]]) -> dict[str, Any]:
    import urllib.error

    def urlopen(url: str, timeout: float | None = None) -> Any:
        calls.append(("GET", [url], {"timeout": timeout}))
        raise urllib.error.URLError("guard: no endpoint")

    return {"services.runtime.health.healthcheck.urllib.request.urlopen": urlopen}


def invoke(argv: list[str]) -> Any:
    """What `specdec ARGV` (or `specdec demo ...`, `healthcheck ...`) calls, prints and returns."""
    calls: list[tuple[str, Any, Any]] = []
    out = io.StringIO()
    entry, *rest = argv
    with contextlib.ExitStack() as stack:
        spies = {"specdec": _spies, "mcp": _spies, "demo": _demo_spies, "healthcheck": _healthcheck_spies}[entry](calls)
        for target, replacement in spies.items():
            stack.enter_context(mock.patch(target, replacement))
        stack.enter_context(contextlib.redirect_stdout(out))
        stack.enter_context(contextlib.redirect_stderr(io.StringIO()))
        try:
            if entry == "specdec":
                args = build_parser().parse_args(rest)
                rc: Any = args.func(args)
            elif entry == "mcp":
                from services.mcp import command

                rc = command.main(rest)
            elif entry == "demo":
                from services.cli import demo

                rc = demo.main(rest)
            else:
                from services.runtime.health import healthcheck

                rc = healthcheck.main(rest)
        except SpecdecError as exc:
            rc = f"{type(exc).__name__}: {exc}"
        except ValidationError as exc:
            rc = f"ValidationError: {exc}"
    # A published event's ID is new each time: not an argument the operator set.
    return calls, rc, re.sub(r"\b[0-9a-f]{32}\b", "<event-id>", out.getvalue())


def request_outcome(ctx: Ctx, step: str, name: str) -> tuple[list[Any], str | None]:
    """(what `specdec request STEP RUN --input NAME=...` published, its refusal or None)."""
    _inputs_bundle(ctx)
    calls, rc, _ = invoke(["specdec", "request", step, RUN, "--input", f"{name}={_INPUT_URIS[0]}"])
    published = [c for c in calls if c[0] == "publish"]
    return published, rc if isinstance(rc, str) else None


# Two artifacts a request may name, in OTHER_RUN of the inputs bundle.
_INPUT_URIS = (f"bundle://{OTHER_RUN}/training/output/model.safetensors",
               f"bundle://{OTHER_RUN}/corpus/CORPUS.jsonl")


def _uri(name: str) -> str:
    return _INPUT_URIS[1] if name == "corpus" else _INPUT_URIS[0]


def _inputs_bundle(ctx: Ctx) -> None:
    from services.runtime.bundle.bundle import BundleStore

    if _INPUTS_ROOT and _INPUTS_ROOT[0].parent == ctx.tmp:
        return
    root = ctx.tmp / "cli-inputs"
    bundle = BundleStore(root, fsync=False)
    for uri in _INPUT_URIS:
        bundle.write_bytes(OTHER_RUN, uri.split("/", 3)[3], uri.encode())
    _INPUTS_ROOT[:] = [root]


def cli_checks(ctx: Ctx) -> dict[str, tuple[list[str], list[str]]]:
    """argument (as fields.cli_arguments names it, without `cli `) -> (base argv, changed argv)."""
    _inputs_bundle(ctx)
    checks = {f"specdec {name}": (["specdec", *base], ["specdec", *changed])
              for name, (base, changed) in _specdec_checks(ctx).items()}
    for step, inputs in STEP_INPUTS.items():
        for name in inputs:
            checks[f"specdec request --input {{{step}}}{name}"] = (
                ["specdec", "request", step, RUN], ["specdec", "request", step, RUN, "--input", f"{name}={_uri(name)}"])
    campaign = str(ctx.tmp / "demo-campaign.yaml")
    checks.update(
        {
            "specdec mcp --http": (["mcp"], ["mcp", "--http"]),
            "specdec mcp --host": (["mcp", "--http"], ["mcp", "--http", "--host", "0.0.0.0"]),
            "specdec mcp --port": (["mcp", "--http"], ["mcp", "--http", "--port", "9001"]),
            "specdec demo --campaign": (["demo"], ["demo", "--campaign", campaign]),
            "specdec demo --timeout": (["demo"], ["demo", "--timeout", "60"]),
            "healthcheck check --port": (
                ["healthcheck", "check", "--port", "8080"],
                ["healthcheck", "check", "--port", "8081"],
            ),
            "healthcheck check --host": (
                ["healthcheck", "check", "--port", "8080"],
                ["healthcheck", "check", "--port", "8080", "--host", "10.0.0.7"],
            ),
            "healthcheck check --timeout-s": (
                ["healthcheck", "check", "--port", "8080"],
                ["healthcheck", "check", "--port", "8080", "--timeout-s", "1.5"],
            ),
        }
    )
    return checks


def request_input_keys() -> list[str]:
    """Every name a step reads as a request input, as the CLI guard names it."""
    return [f"specdec request --input {{{step}}}{name}" for step, inputs in STEP_INPUTS.items() for name in inputs]


def _specdec_checks(ctx: Ctx) -> dict[str, tuple[list[str], list[str]]]:
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
        "submit --experiment-id": (["submit", "a.yaml"], ["submit", "a.yaml", "--experiment-id", "my-run-7"]),
        "mcp <args>": (["mcp"], ["mcp", "--http"]),
        "validate <campaign>": (["validate", "a.yaml"], ["validate", "b.yaml"]),
        **_verb_checks(swap),
        "validate --json": (["validate", "a.yaml"], ["validate", "a.yaml", "--json"]),
        "approve <run_id>": (["approve", RUN], ["approve", OTHER_RUN]),
        "approve --i-understand-this-mutates-cluster": (["approve", RUN],
                                                        ["approve", RUN, "--i-understand-this-mutates-cluster"]),
        "request <step>": (["request", "bench", RUN], ["request", "gate", RUN]),
        "request <run_id>": (["request", "bench", RUN], ["request", "bench", OTHER_RUN]),
        "request --input": (["request", "bench", RUN],
                            ["request", "bench", RUN, "--input", f"training.output={_INPUT_URIS[0]}"]),
        "request --reason": (["request", "bench", RUN], ["request", "bench", RUN, "--reason", "re-bench"]),
        "watch <run_id>": (["watch"], ["watch", RUN]),
        "watch --from-start": (["watch"], ["watch", "--from-start"]),
        "watch --timeout": (["watch"], ["watch", "--timeout", "5"]),
        "status <run_id>": (["status", RUN], ["status", OTHER_RUN]),
        "status --json": (["status", RUN], ["status", RUN, "--json"]),
        "cleanup <run_id>": (["cleanup", RUN], ["cleanup", OTHER_RUN]),
        "cleanup --i-understand-this-kills-processes": (["cleanup", RUN],
                                                        ["cleanup", RUN, "--i-understand-this-kills-processes"]),
        "cleanup --json": (["cleanup", RUN], ["cleanup", RUN, "--json"]),
        "resume <run_id>": (["resume", RUN], ["resume", OTHER_RUN]),
        "resume --json": (["resume", RUN], ["resume", RUN, "--json"]),
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
        "gate --guard": (gate, [*gate, "--guard", "ttft:p99"]),
        "gate --min-trials": (gate, [*gate, "--min-trials", "5"]),
        "gate --min-effect": (gate, [*gate, "--min-effect", "60"]),
        "gate --server-bias": (gate, [*gate, "--server-bias", "60"]),
        "gate --max-trials": (gate, [*gate, "--max-trials", "15"]),
        # A check: the one contradicting tpot is refused, the other decides.
        "gate --direction": ([*gate, "--direction", "lower-is-better"], [*gate, "--direction", "higher-is-better"]),
        "gate --out": (gate, [*gate, "--out", str(t / "DECISION.json")]),
        "report <run_id>": (["report", RUN], ["report", OTHER_RUN]),
        "report --out": (["report", RUN], ["report", RUN, "--out", str(t / "report-copy")]),
        "next <run_id>": (["next", RUN], ["next", OTHER_RUN]),
        "next --out": (["next", RUN], ["next", RUN, "--out", str(t / "next-campaign.yaml")]),
        "publish <run_id>": (pub, [pub[0], OTHER_RUN, *pub[2:]]),
        "publish --target": (pub, swap(pub, "--target", "https://reports.example.com/upload")),
        "publish --dry-run": ([*pub, "--i-understand-this-publishes-externally"],
                              [*pub, "--i-understand-this-publishes-externally", "--dry-run"]),
        "publish --i-understand-this-publishes-externally": (pub, [*pub, "--i-understand-this-publishes-externally"]),
        "publish --publish-draft": (pub, [*pub, "--publish-draft", "reviewed by hand: the DRAFT reason is known"]),
        "bench plan <run_id>": (["bench", "plan", RUN], ["bench", "plan", OTHER_RUN]),
        "bench plan --json": (["bench", "plan", RUN], ["bench", "plan", RUN, "--json"]),
        "training plan <run_id>": (["training", "plan", RUN], ["training", "plan", OTHER_RUN]),
        "training plan --json": (["training", "plan", RUN], ["training", "plan", RUN, "--json"]),
    }


def _verb_checks(swap: Callable[[list[str], str, str], list[str]]) -> dict[str, tuple[list[str], list[str]]]:
    """The workflow's verbs (services/app/workflow/verbs.py): each argument reaches the verb's call."""
    ev = ["evidence-init", "--family", "toy-llama"]
    ci = ["campaign-init", "--config", "a.yaml", "--experiment-id", "my-run-7", "--family", "toy-llama"]
    cr = ["campaign-run", "--config", "a.yaml", "--campaign", "my-run-7"]
    pl = ["publish-to-lake", "--campaign", "my-run-7"]
    return {
        "evidence-init --family": (ev, swap(ev, "--family", "other")),
        "evidence-init --intent": (ev, [*ev, "--intent", "does ngram pay"]),
        "evidence-init --run-id": (ev, [*ev, "--run-id", "my-run-7"]),
        "campaign-init --config": (ci, swap(ci, "--config", "b.yaml")),
        "campaign-init --experiment-id": (ci, swap(ci, "--experiment-id", "my-run-8")),
        "campaign-init --family": (ci, swap(ci, "--family", "other")),
        "campaign-init --evidence-bundle": (ci, [*ci, "--evidence-bundle", "bundles/my-run-7"]),
        "campaign-run --config": (cr, swap(cr, "--config", "b.yaml")),
        "campaign-run --campaign": (cr, swap(cr, "--campaign", "my-run-8")),
        "campaign-run --dry-run": (cr, [*cr, "--dry-run"]),
        "campaign-run --i-understand-this-mutates-cluster": (cr, [*cr, "--i-understand-this-mutates-cluster"]),
        "publish-to-lake --campaign": (pl, swap(pl, "--campaign", "my-run-8")),
        "publish-to-lake --target": (pl, [*pl, "--target", "file:///tmp/lake"]),
        "publish-to-lake --dry-run": (pl, [*pl, "--dry-run"]),
        "publish-to-lake --publish-draft": (pl, [*pl, "--publish-draft", "reviewed by hand"]),
        "publish-to-lake --i-understand-this-publishes-externally": (
            pl,
            [*pl, "--i-understand-this-publishes-externally"],
        ),
    }


def _gate_files(root: Path) -> None:
    from tests.unit.cli.commands.test_gate import write_cell

    if not (root / "standing").exists():
        write_cell(root, "standing", seed=1)
        write_cell(root, "standing2", seed=3)
        write_cell(root, "ngram", factor=0.75, seed=2)


