"""What runs, as data: the observables a campaign field must change.

Each observable is what a consumer *does* with a campaign, never what a plan
says about it in words, nor the identity it only records:

- `run_id`: the run ID `specdec submit` gives the run (every process, job and
  object is labelled with it);
- `training_data`: the corpus the profiler and the corpus step build from the
  traffic (the records the trainer trains on, the heldout split the bench sends);
- `capacity`: the commands the capacity check runs and the node it selects;
- `training`: the trainer's launch (argv, environment, cwd; sbatch argv and job
  script; the Job manifest), its deadline, the probe argv, the data it is given and
  the folder probed and served as the draft (`checkpoint_dir`);
- `reuse`: whether the draft of an earlier run with identical training inputs is
  copied instead of training (earlier runs of every traffic variant are seeded);
- `serve`: each server launch as its executor starts it (argv and log folder;
  sbatch argv and job script; Pod manifest and kubectl argv), the node it is
  pinned to and re-checked on, and the config its engine read-back must show;
- `requests`: every measured window as the bench-runner starts it, captured at
  its process boundary: the builtin load generator's WindowSpec and the request
  bodies it sends, or the operator bench argv as rendered (and the prompts file
  it is given);
- `eval`: the operator eval argv as rendered, per cell;
- `draft`: whether bench.completed marks every result DRAFT (the report follows);
- `gate`: the gate's decision on fixed trials (outcomes only: never the words
  or figures that echo the spec);
- `gate_on_plan`: the gate's decision on trials that carry exactly the identity,
  trial counts and levels the bench plan gives them (an identity field counts
  through this only: when a difference between arms changes the decision);
- `publish`: where the publisher sends and whether live; `approval`: whether the
  services run their plans at once.

Each campaign first goes through `specdec submit`'s own validation
(`load_campaign` + `absolutize`, from the repository root): a campaign refused
there is `Refused` as a whole. A consumer's refusal (a StepFailed family error:
the step would fail with it) is `Refused` for its observable.

Observations are cached by the campaign's JSON (the profile and corpus chain by
the parts of the campaign those two steps read), so a base campaign shared by
many checks, and every observable that needs the same bench plan, is computed once.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any
from unittest import mock

import orjson
import yaml

from contracts import layout
from contracts.campaign import Campaign
from contracts.events import BenchRequested, ProfileRequested, ReportRendered
from services.runtime.errors import SpecdecError
from services.shared.capacity import kubernetes, slurm
from services.shared.scheduler.runner import RunResult
from tests.unit.guard.context import (
    INPUTS,
    PATHS,
    ROOT,
    RUN,
    SCHEDULER_OUTPUTS,
    Ctx,
    ref,
)

BASE_URL = "http://10.0.0.7:8000"
TRAINED = "/drafts/trained"


@dataclass(frozen=True)
class Refused:
    """A campaign refused at submit, or by a consumer: an outcome too (nothing runs, with this reason)."""

    error: str
    message: str


def outcome(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    try:
        return fn(*args, **kwargs)
    except SpecdecError as exc:
        return Refused(type(exc).__name__, str(exc))


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


# --- submit -------------------------------------------------------------------------------------

_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_DUMPER = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


def _fast_load(stream: Any) -> Any:
    return yaml.load(stream, Loader=_LOADER)


def submitted(ctx: Ctx, data: dict[str, Any]) -> Campaign | Refused:
    """The campaign as `specdec submit` stores it (validated, templates checked, paths resolved), or its refusal."""
    key = json.dumps(data, sort_keys=True, default=str)
    cache = ctx.cache("submitted")
    if key not in cache:
        cache[key] = _submit(ctx, data)
    return cache[key]


def _submit(ctx: Ctx, data: dict[str, Any]) -> Campaign | Refused:
    from services.app.campaign.prepare import absolutize, load_campaign

    path = ctx.file("campaign.yaml", yaml.dump(data, Dumper=_DUMPER, sort_keys=False))
    # libyaml reads what PyYAML's pure-Python reader reads, ten times faster: the guard submits
    # hundreds of campaigns.
    with contextlib.chdir(ROOT), mock.patch.object(yaml, "safe_load", _fast_load):
        try:
            campaign, _ = load_campaign(path)
            return absolutize(campaign, ROOT)
        except SpecdecError as exc:
            return Refused(type(exc).__name__, str(exc))


# --- the observables ----------------------------------------------------------------------------

Observe = Callable[[Ctx, Campaign], Any]
OBSERVABLES: dict[str, Observe] = {}


def observable(fn: Observe) -> Observe:
    OBSERVABLES[fn.__name__] = fn
    return fn


def observe(ctx: Ctx, campaign: Campaign, name: str, *, cached: bool = True) -> Any:
    fn = OBSERVABLES[name]
    if not cached:
        return fn(ctx, campaign)
    cache = ctx.cache(name)
    key = campaign.model_dump_json()
    if key not in cache:
        cache[key] = fn(ctx, campaign)
    return cache[key]


def observe_data(ctx: Ctx, data: dict[str, Any], names: tuple[str, ...]) -> dict[str, Any] | Refused:
    """What runs for a raw campaign: each named observable, or the submit refusal."""
    campaign = submitted(ctx, data)
    if isinstance(campaign, Refused):
        return campaign
    return {name: observe(ctx, campaign, name) for name in names}


@observable
def run_id(ctx: Ctx, c: Campaign) -> Any:
    """The run ID submit gives (its time stamp and random suffix left out): every label carries it."""
    from services.app.campaign.submit import new_run_id

    return new_run_id(c.family)[: -len("-20261130-010101-abcdef")]


# --- profiler and corpus ------------------------------------------------------------------------


def _chain(ctx: Ctx, c: Campaign) -> tuple[Any, Any]:
    """(bundle holding RUN's profile and corpus, the corpus outcome); keyed by what the two steps read."""
    key = json.dumps(c.model_dump(mode="json", include={"traffic", "corpus", "target"}), sort_keys=True)
    cache = ctx.cache("chain")
    if key not in cache:
        cache[key] = _run_chain(ctx, c)
    return cache[key]


def _run_chain(ctx: Ctx, c: Campaign) -> tuple[Any, Any]:
    from services.corpus.app import run_corpus
    from services.profiler.app import run_profile

    bundle = ctx.fresh_bundle()
    bundle.write_json(RUN, layout.CAMPAIGN, c)
    event = ProfileRequested(run_id=RUN, producer="guard", requested_by="guard")
    profiled = outcome(run_profile, bundle, event, "profiler/guard")
    if isinstance(profiled, Refused):
        return None, profiled
    done = outcome(run_corpus, bundle, event, "corpus/guard")
    if isinstance(done, Refused):
        return None, done
    if done.corpus is None:
        return bundle, ("skipped", done.skipped_reason)
    return bundle, _digest(bundle.read_bytes(RUN, layout.CORPUS))


@observable
def training_data(ctx: Ctx, c: Campaign) -> Any:
    """The corpus the trainer trains on and whose heldout split the bench sends (its sha256), or why none."""
    return _chain(ctx, c)[1]


# --- capacity -----------------------------------------------------------------------------------


class Recorded:
    """Answers the scheduler's read commands from recorded outputs; every other command exits 0."""

    def __init__(self, selectors: dict[str, str]) -> None:
        def read(name: str) -> str:
            return (SCHEDULER_OUTPUTS / name).read_text()

        self.outputs = {
            tuple(slurm.sinfo_argv(selectors)): read("sinfo.txt"),
            tuple(slurm.squeue_argv(selectors)): read("squeue.txt"),
            tuple(kubernetes.nodes_argv(selectors)): read("kubectl-get-nodes.json"),
            tuple(kubernetes.pods_argv()): read("kubectl-get-pods-A.json"),
        }
        self.calls: list[list[str]] = []
        self.declared: list[list[str]] = []  # per idle check, the variables it got beyond the platform's

    def __call__(self, argv: Any, *, timeout_s: float, env: dict[str, str] | None = None) -> RunResult:
        from services.runtime.processes.workload_env import is_platform

        argv = [str(a) for a in argv]
        self.calls.append(argv)
        if env is not None:
            self.declared.append(sorted(name for name in env if not is_platform(name)))
        return RunResult(argv=tuple(argv), exit_code=0, stdout=self.outputs.get(tuple(argv), ""), stderr="",
                         duration_s=0.01)


@observable
def capacity(ctx: Ctx, c: Campaign) -> Any:
    """The commands the capacity check runs and the node it selects."""
    from services.shared.capacity.check import check_node

    runner = Recorded(c.capacity.selectors)
    # This machine as an idle node: the processes other work runs here are not the campaign's doing.
    with mock.patch("services.shared.capacity.local.scan_processes", list), \
            mock.patch("services.shared.capacity.local.shutil.which", lambda name: None):
        verdict = outcome(check_node, c.capacity, None, run_id=RUN, runner=runner)
    return runner.calls, runner.declared, verdict if isinstance(verdict, Refused) else verdict.node


# --- trainer-proxy ------------------------------------------------------------------------------


def _skip(c: Campaign) -> Any:
    from services.trainer_proxy.errors import PlanError
    from services.trainer_proxy.planning.inputs import load_cells, skip_reason

    try:
        return skip_reason(c, load_cells(c, ROOT))
    except PlanError as exc:
        return Refused(type(exc).__name__, str(exc))


def _key(ctx: Ctx, c: Campaign) -> Any:
    from services.trainer_proxy.planning import reuse

    return reuse.compute_key(c, INPUTS, str(ctx.workdir))[0]


@observable
def training(ctx: Ctx, c: Campaign) -> Any:
    """The trainer's launch as the executor starts it, with what it is given (as trained, not reused)."""
    from services.trainer_proxy.planning.builder import build_plan

    skipped = _skip(c)
    if skipped is not None:
        return skipped if isinstance(skipped, Refused) else ("skipped", skipped)
    key = _key(ctx, c)
    plan = outcome(build_plan, c, run_id=RUN, node="node-a", scheduler=c.capacity.scheduler, paths=PATHS,
                   inputs=INPUTS, input_key=key, reuse=None, reuse_note="")
    if isinstance(plan, Refused):
        return plan
    launch = plan.launch.model_dump(mode="json", exclude={"note"}) if plan.launch else None
    probes = plan.probes.model_dump(mode="json", include={"operator_argv", "timeout_s"}) if plan.probes else None
    return {"launch": launch, "timeout_s": plan.timeout_s, "kill_grace_s": plan.kill_grace_s, "probes": probes,
            "node": plan.node, "target": plan.target, "tokenizer": plan.tokenizer, "output_dir": plan.output_dir,
            "checkpoint_dir": plan.checkpoint_dir, "inputs": plan.inputs.model_dump(mode="json")}


# A trainer's output in three forms: what the trainer-proxy relays of it depends on commands.train.progress.
TRAINER_OUTPUT = b'{"step": 1, "total": 4, "loss": 2.0}\nstep 2/4 loss=1.5\nit 3\n'


@observable
def progress(ctx: Ctx, c: Campaign) -> Any:
    """What the trainer-proxy's progress relay reads of a fixed trainer output
    (services/trainer_proxy/execution/progress.py)."""
    from services.trainer_proxy.execution.progress import ProgressScanner

    train = c.commands.train
    if train is None or train.progress is None:
        return "nothing relayed"
    scanner = ProgressScanner(train.progress)
    scanner.feed("stdout", TRAINER_OUTPUT)
    return scanner.matches, scanner.latest


@observable
def reuse(ctx: Ctx, c: Campaign) -> Any:
    """Which earlier run's draft is copied instead of training (None: the trainer runs)."""
    from services.trainer_proxy.planning import reuse as lookup

    skipped = _skip(c)
    if skipped is not None:
        return skipped if isinstance(skipped, Refused) else ("skipped", skipped)
    train = c.commands.train
    if train is None or not train.reuse:
        return "off: the trainer runs"
    key = _key(ctx, c)
    if key is None:
        return "no key: the trainer runs"
    found = lookup.find_reusable(_earlier_runs(ctx), key, RUN).found
    return found.from_run if found else None


def _earlier_runs(ctx: Ctx) -> Any:
    """A bundle root where, for every traffic variant, an earlier run completed training on the
    variant's own campaign (its key recorded, its draft intact): the variant reuses it."""
    cache = ctx.cache("earlier")
    if "bundle" in cache:
        return cache["bundle"]
    from contracts.artifacts.training import KeyRecord
    from services.trainer_proxy.execution.capture import hash_outputs
    from tests.unit.guard.variants import VARIANTS

    bundle = ctx.fresh_bundle()
    for index, variant in enumerate(v for v in VARIANTS if v.traffic == "file"):
        c = submitted(ctx, variant.data())
        assert not isinstance(c, Refused), f"{variant.id}: {c}"
        key = _key(ctx, c)
        assert key is not None, "the guard's working folder must hold the target"
        run = f"toy-20261129-00000{index}-000000"
        output = bundle.run_dir(run) / layout.TRAINING_OUTPUT_DIR
        output.mkdir(parents=True)
        (output / "model.safetensors").write_bytes(b"draft weights")
        manifest, _ = hash_outputs(bundle, run, output_dir=output, partial=False)
        bundle.write_json(run, layout.TRAINING_INPUT_KEY,
                          KeyRecord(run_id=run, key=key.key, inputs=key, output=manifest, reused_from=None))
    cache["bundle"] = bundle
    return bundle


# --- bench-runner -------------------------------------------------------------------------------


def bench_plan(ctx: Ctx, c: Campaign) -> Any:
    """The bench plan (not an observable: its words and identities are not what runs)."""
    cache = ctx.cache("bench_plan")
    key = c.model_dump_json()
    if key not in cache:
        cache[key] = outcome(_bench_plan, c)
    return cache[key]


def _bench_plan(c: Campaign) -> Any:
    from services.bench.planning.builder import build_plan
    from services.bench.planning.staging import load_matrix

    return build_plan(c, load_matrix(c), run_id=RUN, default_node="node-a",
                      training_output=None if c.shapes_only else TRAINED,
                      prompts={"source": layout.BENCH_PROMPTS}, run_dir=PATHS.run_dir, cwd=PATHS.cwd)


@observable
def serve(ctx: Ctx, c: Campaign) -> Any:
    """Every server launch as its executor starts it, and what its engine must be shown to run."""
    from services.bench.executors.engine_compare import declared_of

    plan = bench_plan(ctx, c)
    if isinstance(plan, Refused):
        return plan
    cells = {cell.cell_id: cell for cell in plan.cells}
    launches = []
    for index, launch in enumerate(plan.launches):
        cell = cells[launch.cell_id]
        entry: dict[str, Any] = {
            "cell": cell.cell_id, "trials": launch.trials, "node": cell.node, "env": cell.env,
            "engine_check": asdict(declared_of(cell, max_model_len=c.target.max_model_len)),
        }
        if plan.executor == "local":
            entry.update(argv=cell.serve_argv, folder=layout.launch_folder(cell.cell_id, index))
        elif plan.executor == "slurm":
            entry["slurm"] = launch.slurm.model_dump(mode="json") if launch.slurm else None
        else:
            entry["kubernetes"] = launch.kubernetes.model_dump(mode="json") if launch.kubernetes else None
        launches.append(entry)
    return {"executor": plan.executor, "launches": launches, "readiness_timeout_s": plan.readiness_timeout_s}


@observable
def draft(ctx: Ctx, c: Campaign) -> Any:
    """Whether bench.completed marks every result DRAFT (the publisher's report follows it)."""
    plan = bench_plan(ctx, c)
    return plan if isinstance(plan, Refused) else plan.draft


def prompts(ctx: Ctx, c: Campaign) -> Any:
    """The prompts every window sends, as plan_bench builds them from this campaign's corpus or shapes."""
    from services.bench.planning.staging import build_prompts, load_matrix

    cache = ctx.cache("prompts")
    key = c.model_dump_json()
    if key not in cache:
        bundle, corpus = _chain(ctx, c)
        if isinstance(corpus, Refused):
            cache[key] = corpus
        else:
            request = BenchRequested(run_id=RUN, producer="guard", requested_by="guard")
            cache[key] = outcome(lambda: build_prompts(bundle, c, load_matrix(c), request))
    return cache[key]


class _Started(Exception):
    """What the bench-runner was about to start, caught at its process boundary."""

    def __init__(self, what: dict[str, Any]) -> None:
        self.what = what


def _bench_run(ctx: Ctx, c: Campaign, plan: Any, sent: list[Any]) -> Any:
    from services.bench.run import BenchRun

    async def nothing(*_: Any, **__: Any) -> None:
        return None

    scratch = ctx.cache("scratch").setdefault("bundle", ctx.fresh_bundle())
    return BenchRun(plan, scratch, sent, emit=nothing, recheck=nothing, event_factory=lambda **_: None,  # type: ignore[arg-type]  # nothing is emitted
                    eval_values={"model": plan.cells[0].identity["model"], "tokenizer": c.target.tokenizer_dir},
                    max_model_len=c.target.max_model_len)


_TLS: list[Any] = []


def _tls() -> Any:
    # A load generator builds one TLS context (tens of ms: the system's certificates); the
    # guard only asks it for request bodies, so one context serves every window.
    if not _TLS:
        import ssl

        _TLS.append(ssl.create_default_context())
    return _TLS[0]


@contextlib.contextmanager
def _process_boundary():
    """Every process the bench-runner would start raises _Started with what it was given."""
    from services.bench.loadgen.loadgen import LoadGenerator

    async def window(spec: Any, sent: Any, *, run_id: str) -> Any:
        generator = LoadGenerator(spec)
        bodies = [_digest(generator._body(p)) for p in sent]
        raise _Started({"window": spec.model_dump(mode="json"), "bodies": bodies})

    def spawned(argv: Any, **_: Any) -> Any:
        raise _Started({"argv": list(argv)})

    async def no_metrics(base_url: str) -> None:
        return None

    tls = _tls()
    with mock.patch("services.bench.trial.run_window_process", window), \
            mock.patch("services.bench.trial.spawn", spawned), \
            mock.patch("services.bench.evaluate.spawn", spawned), \
            mock.patch("services.bench.trial.scrape_metrics", no_metrics), \
            mock.patch("services.bench.loadgen.loadgen.ssl.create_default_context", lambda: tls):
        yield


def _started(coros: list[Any]) -> list[Any]:
    """What each coroutine was about to start (None: nothing), in one event loop."""

    async def each() -> list[Any]:
        found: list[Any] = []
        try:
            for coro in coros:
                try:
                    await coro
                    found.append(None)
                except _Started as started:
                    found.append(started.what)
                except SpecdecError as exc:
                    found.append(Refused(type(exc).__name__, str(exc)))
        finally:
            for coro in coros[len(found) + 1:]:
                coro.close()  # never started: an earlier one raised something else
        return found

    return asyncio.run(each())


@observable
def requests(ctx: Ctx, c: Campaign) -> Any:
    """Every measured window as started: the load generator's spec and request bodies, or the operator's argv."""
    plan = bench_plan(ctx, c)
    if isinstance(plan, Refused):
        return plan
    sent = prompts(ctx, c)
    if isinstance(sent, Refused):
        return sent
    run = _bench_run(ctx, c, plan, sent)
    keys = [(cell, trial, level) for cell in plan.cells for trial in range(cell.trials) for level in cell.concurrency]
    with _process_boundary():
        started = _started([run._trial(cell, BASE_URL, trial, level) for cell, trial, level in keys])
    windows = [(cell.cell_id, trial, level, what) for (cell, trial, level), what in zip(keys, started, strict=False)]
    operator = any(cell.bench != "builtin" for cell in plan.cells)
    prompts_file = _digest(b"".join(p.model_dump_json().encode() + b"\n" for p in sent)) if operator else None
    return {"windows": windows, "prompts_file": prompts_file}


@observable
def eval(ctx: Ctx, c: Campaign) -> Any:
    """The operator eval argv per cell as rendered (builtin: agreement with the standing cell, which needs no
    command)."""
    plan = bench_plan(ctx, c)
    if isinstance(plan, Refused):
        return plan
    run = _bench_run(ctx, c, plan, [])
    operator = [cell for cell in plan.cells if cell.eval != "builtin"]
    with _process_boundary():
        started = dict(
            zip(
                [cell.cell_id for cell in operator],
                _started(
                    [run._evaluate(cell, None, BASE_URL, 0, concurrency=cell.concurrency[0]) for cell in operator]
                ),
                strict=False,
            )
        )
    return [(cell.cell_id, started.get(cell.cell_id, "builtin")) for cell in plan.cells]


# --- gate ---------------------------------------------------------------------------------------


def _decision(decision: Any) -> Any:
    """What the gate decided: the campaign's outcome and winner, each candidate's and each level's
    outcome. Not its words, figures or file names: those would echo the spec and the cell IDs."""
    if isinstance(decision, Refused):
        return decision
    return {"decision": decision.decision, "winner": decision.winner,
            "candidates": [(c.candidate, c.outcome, [(lvl.concurrency, lvl.outcome) for lvl in c.levels])
                           for c in decision.candidates]}


@observable
def gate(ctx: Ctx, c: Campaign) -> Any:
    """The decision on fixed trials (a candidate better on TPOT and throughput, worse on TTFT p99)."""
    from services.gate import decide

    return _decision(outcome(decide, ctx.gate_baseline, ctx.gate_candidates, c.gate))


def plan_trials(plan: Any) -> dict[str, list[Any]]:
    """Trial results of every cell of a bench plan, as the bench would record them: the identity
    the runner gives each trial (services/bench/trial._identity), every level and trial the plan
    names, fixed measurements (candidates 30 % faster in TPOT, acceptance 0.6, full agreement)."""
    import numpy as np

    from contracts.artifacts.results import Evaluation
    from contracts.artifacts.trials import parse_trial
    from services.bench.trial import _identity
    from services.gate.simulate import NoiseModel, spec_counters, trial_result

    baseline = next(cell.cell_id for cell in plan.cells if cell.role == "standing")
    arms: dict[str, list[Any]] = {}
    for position, cell in enumerate(plan.cells):
        rng = np.random.default_rng(position)
        standing = cell.role == "standing"
        spec = cell.speculative_config
        trials = []
        for level in cell.concurrency:
            for trial in range(cell.trials):
                ident = _identity(cell, concurrency=level, trial=trial, baseline=baseline)
                raw = trial_result(
                    rng, factor=1.0 if standing else 0.7, concurrency=level,
                    noise=NoiseModel(trial_cv=0.01, request_cv=0.05), detailed=False, ident=ident,
                    counters=spec_counters(0.6, spec["num_speculative_tokens"]) if spec else None,
                    evaluation=None if standing else Evaluation(agreement_rate=1.0, samples=32),
                )
                trials.append(parse_trial(raw, source=f"{cell.cell_id}/trial-{trial}/c{level}.json"))
        arms[cell.cell_id] = trials
    return arms


def baseline_of(plan: Any) -> str:
    return next(cell.cell_id for cell in plan.cells if cell.role == "standing")


@observable
def gate_on_plan(ctx: Ctx, c: Campaign) -> Any:
    """The decision on trials whose identity, trial counts and levels are the bench plan's."""
    from services.gate import decide

    plan = bench_plan(ctx, c)
    if isinstance(plan, Refused):
        return plan
    arms = plan_trials(plan)
    base = arms.pop(baseline_of(plan))
    return _decision(outcome(decide, base, arms, c.gate))


# --- publisher, approval ------------------------------------------------------------------------


@observable
def publish(ctx: Ctx, c: Campaign) -> Any:
    """Where the publisher sends the report and whether it is live (its transport has its own tests)."""
    from services.publisher import app
    from services.publisher.publish.publish import mode

    calls: list[dict[str, Any]] = []

    async def spy(bundle: Any, run_id: str, *, target: str, key: str, acknowledged_by: Any, **_: Any) -> Any:
        dry_run, _why = mode(acknowledged_by, force_dry_run=False)
        calls.append({"target": target, "acknowledged_by": acknowledged_by, "dry_run": dry_run})
        return mock.Mock(target=target, dry_run=dry_run, files=[], response=None)

    event = ReportRendered(run_id=RUN, producer="guard", markdown=ref("report/report.md"),
                           html=ref("report/report.html"), draft=False)
    with mock.patch.object(app, "publish_run", spy):
        asyncio.run(app.publish_for(ctx.fresh_bundle(), event, c, producer="publisher/guard"))
    return calls


@observable
def approval(ctx: Ctx, c: Campaign) -> Any:
    """Per reviewed step, whether the service runs its plan at once (pre-approved) or waits for `specdec approve`."""
    from contracts.campaign import REVIEWED_STEPS
    from services.runtime.approval import pre_approved

    return {step: pre_approved(c, step) for step in REVIEWED_STEPS}


def names(found: Any, field: str) -> bool:
    """Whether a refusal names the field: its last part (`serve_pod_template`), or its dotted
    path or that of a container it sits in (`commands.train` for `commands.train.argv`: setting
    the one sets the other), without [] / {} marks."""
    parts = [part.split("[")[0].split("{")[0] for part in field.split(".")]
    text = found.message if isinstance(found, Refused) else str(found)
    spellings = [parts[-1]] + [".".join(parts[:n]) for n in range(2, len(parts) + 1)]
    return any(spelling in text for spelling in spellings)


def refusals(observed: Any) -> list[Refused]:
    """Every refusal in an observation (the submit refusal, or a consumer's anywhere inside)."""
    if isinstance(observed, Refused):
        return [observed]
    if isinstance(observed, dict):
        return [r for value in observed.values() for r in refusals(value)]
    if isinstance(observed, (list, tuple)):
        return [r for value in observed for r in refusals(value)]
    return []


def small(value: Any) -> str:
    """A short rendering for failure messages."""
    text = orjson.dumps(value, default=str).decode() if not isinstance(value, Refused) else repr(value)
    return text if len(text) < 400 else text[:400] + "..."
