"""The bench plan's builder: `build_plan` turns the campaign, the matrix and what earlier steps
produced into a `BenchPlan` (model.py): every command that would run, where, in what order, and the
cleanup. Pure: staging.py reads the inputs and stores the plan; the builder refuses a matrix that
cannot give a controlled comparison.
"""

from __future__ import annotations

from typing import Any, Literal

from contracts import layout
from contracts.campaign import Campaign, Cell, Matrix
from contracts.campaign.canonical import CanonicalRecord
from contracts.campaign.matrix import nodes_differ
from contracts.templates import serve_values
from services.bench.executors import kubernetes_pod, slurm_job
from services.bench.executors.serving import serve_argv, speculative_config
from services.bench.loadgen.prompts import source_label
from services.bench.planning.interleave import block_order, launch_order
from services.bench.planning.model import BenchPlan, CellPlan, Launch, LevelNoise, Rounds
from services.runtime.errors import ConfigurationError
from services.shared import campaign_checks, sequential, vllm_cli
from services.shared.quant_labels import quant_label
from services.shared.scheduler import slurm

PORT_PLACEHOLDER = "{port}"
# Where a server listens: loopback for a child of the bench-runner; every
# interface on a scheduler's node, which the runner reaches over the network.
BIND_HOST = {"local": "127.0.0.1", "slurm": "0.0.0.0", "kubernetes": "0.0.0.0"}


def _identity(cell: Cell, campaign: Campaign, spec: dict[str, Any] | None) -> dict[str, Any]:
    serving = cell.serving
    return {
        "model": serving.model or campaign.target.checkpoint,
        "hardware": cell.hardware,
        "quantization": serving.quantization or "none",
        "parallelism": f"tp={serving.tensor_parallel_size}",
        "serving_config": {"speculative": spec, "dtype": serving.dtype, "max_num_seqs": serving.max_num_seqs},
        "workload_shape": source_label(campaign.traffic),
        "regime": cell.regime,
        "graph_mode": serving.graph_mode,
        "source_revision": cell.source_revision or campaign.source_revisions.serving,
        "trial_count": cell.trials,
    }


def source_problems(campaign: Campaign, matrix: Matrix, *, cells_at: str = "matrix.cells") -> list[str]:
    """What the matrix says about its prompts that the prompt source contradicts, and the sequential rounds it
    cannot run, in words (services/shared/campaign_checks.py, where submit makes the same checks)."""
    return [problem.removeprefix("invalid: ") for check in (campaign_checks.workload_shape_problems,
                                                             campaign_checks.round_problems,
                                                             campaign_checks.prompt_count_problems)
            for problem in check(campaign, matrix, cells_at=cells_at)]


def check_matrix(campaign: Campaign, matrix: Matrix, nodes: dict[str, str],
                 canonical: CanonicalRecord | None = None) -> None:
    """Refuse a campaign whose matrix cannot give a controlled comparison: every check `specdec validate` and
    submit make (services/shared/campaign_checks.static_problems; the matrix's own were made when it was read),
    and the nodes as resolved here (a cell without one is served on the capacity step's choice)."""
    problems = campaign_checks.static_problems(campaign, matrix, canonical=canonical)
    if len(set(nodes.values())) > 1:
        problems.append(nodes_differ(nodes))
    if problems:
        raise ConfigurationError("the campaign cannot run live (specdec validate names the same): "
                                 + "; ".join(problems))


def build_plan(
    campaign: Campaign,
    matrix: Matrix,
    *,
    run_id: str,
    default_node: str,
    training_output: str | None,
    prompts: dict[str, Any],
    readiness_timeout_s: float = 300.0,
    run_dir: str | None = None,
    cwd: str | None = None,
    canonical: CanonicalRecord | None = None,
    noise: dict[int, tuple[list[list[float]], list[str]]] | None = None,
) -> BenchPlan:
    """`run_dir` (the run's bundle folder, absolute) and `cwd` (where a job starts)
    are rendered into a scheduler's launches; a local plan does not need them.
    `canonical` (a canonical matrix file's record) gives each cell's declared
    command, shown in the plan beside what is launched with every change.
    `noise` (sequential rounds only): per concurrency level, the objective's per-trial figures of
    each arm of earlier runs of the same target and hardware, and those runs' IDs, for
    the expected trials per arm (services/bench/planning/rounds.earlier_noise)."""
    declared = {record.cell_id: record for record in canonical.cells} if canonical else {}
    executor = campaign.capacity.scheduler
    if executor != "local" and not (run_dir and cwd):
        raise ConfigurationError(f"a {executor} bench plan needs the run's bundle folder and a working folder")
    host = BIND_HOST[executor]
    nodes = {cell.cell_id: cell.node or default_node for cell in matrix.cells}
    check_matrix(campaign, matrix, nodes, canonical)
    ordered = sorted(matrix.cells, key=lambda cell: cell.role != "standing")
    cells = []
    for cell in ordered:
        spec = speculative_config(cell.serving.speculative, training_output=training_output)
        operator_serve = cell.vllm_sweep.serve_cmd
        if operator_serve is None and campaign.commands.serve not in ("builtin", None):
            operator_serve = campaign.commands.serve.argv  # type: ignore[union-attr]  # neither builtin nor None: a template
        changes: list[dict[str, Any]] = []
        if operator_serve is not None:
            values = _operator_values(campaign, cell, run_id, spec, training_output=training_output, host=host)
            argv = operator_serve.render(values)
            source: Literal["builtin", "operator"] = "operator"
            argv, launcher = vllm_cli.entry_argv(argv)
            changes += [{"command": "serve", **launcher}] if launcher else []
        else:
            argv = serve_argv(cell, campaign, host=host, port=0, training_output=training_output)
            argv[argv.index("--port") + 1] = PORT_PLACEHOLDER
            source = "builtin"
        bench: Any = "builtin"
        if cell.vllm_sweep.bench_cmd is not None:
            bench = cell.vllm_sweep.bench_cmd.root
        elif campaign.commands.bench != "builtin" and campaign.commands.bench is not None:
            bench = campaign.commands.bench.argv.root
        evaluation: Any = "builtin"
        if campaign.commands.eval != "builtin" and campaign.commands.eval is not None:
            evaluation = campaign.commands.eval.argv.root
        record = declared.get(cell.cell_id)
        identity = _identity(cell, campaign, spec)
        if record is not None:
            changes = [{"command": "serve", **rewrite.model_dump(mode="json")} for rewrite in record.rewrites] + changes
            changes += [{"command": "bench", **rewrite.model_dump(mode="json")} for rewrite in record.bench_rewrites]
            if isinstance(bench, list):
                _, launcher = vllm_cli.entry_argv(bench)
                changes += [{"command": "bench", **launcher}] if launcher else []
            if record.bench_dataset is not None:
                # The operator's bench draws its own prompts: the identity says which, never the corpus's.
                identity["workload_shape"] = record.bench_dataset
        cells.append(
            CellPlan(
                cell_id=cell.cell_id, role=cell.role, regime=cell.regime, trials=cell.trials,
                concurrency=cell.concurrency, node=nodes[cell.cell_id], identity=identity,
                speculative_config=spec, serve_argv=argv, serve_source=source, bench=bench, eval=evaluation,
                declared_serve_argv=record.serve_cmd if record is not None else None, launch_changes=changes or None,
                declared_engine_args=record.engine_args if record is not None and record.parsed_by_vllm else None,
                unchecked_labels=record.unchecked_labels or None if record is not None else None,
                quant_label=(quant_label(record.identity.get("quant")) or "none")
                if record is not None and record.parsed_by_vllm else None,
                env=list(cell.env) or None,
            )
        )
    cap = campaign.gate.max_trials
    launches = _launch_order(cells, run_id, cap)
    blocks = block_order(run_id, cells, trials=cap) or None
    if executor != "local":
        by_id = {cell.cell_id: cell for cell in cells}
        path = campaign.commands.serve_pod_template
        template = kubernetes_pod.load_pod_template(path) if executor == "kubernetes" and path else None
        launches = [
            _placed(launch, by_id[launch.cell_id], index, campaign, run_id=run_id, run_dir=run_dir or "",
                    cwd=cwd or "", readiness_timeout_s=readiness_timeout_s, template=template)
            for index, launch in enumerate(launches)
        ]
    return BenchPlan(
        run_id=run_id,
        executor=executor,
        cells=cells,
        launches=launches,
        blocks=blocks,
        load=matrix.load,
        prompts=prompts,
        warmup=_warmup(matrix.load.warmup_requests, interleaved=blocks is not None),
        deployment_changes=_changes(executor, launches, run_id, interleaved=blocks is not None),
        cleanup=_cleanup(executor, launches, run_id, interleaved=blocks is not None),
        # Exploratory means DRAFT whatever the trial counts: the operator said these results are not final.
        draft=matrix.exploratory,
        readiness_timeout_s=readiness_timeout_s,
        rounds=_rounds(campaign, cells, noise or {}) if cap is not None else None,
    )


ROUND_RULE = (
    "After each block from min_trials on, every level of every candidate that has not failed is looked at "
    "(services/shared/sequential.py, the gate's own rule: group-sequential alpha spending over the looks "
    "min_trials..max_trials): a level is decided when its objective's interval lies beyond the minimum effect on "
    "either side or within it, or a guard's lies beyond it on the worse side. The rounds stop when every level "
    "is decided, or at max_trials; the gate then decides on the trials measured."
)


def _rounds(campaign: Campaign, cells: list[CellPlan], noise: dict[int, tuple[list[list[float]], list[str]]]) -> Rounds:
    """The plan's sequential rounds: the range, the rule and the expected trials per arm from earlier noise."""
    gate = campaign.gate
    assert gate.max_trials is not None and gate.objective is not None
    candidates = sum(cell.role == "candidate" for cell in cells)
    alpha = sequential.side_alpha(max(candidates, 1))
    first = max(gate.min_trials, sequential.MIN_LOOK_TRIALS)
    levels = sorted({level for cell in cells for level in cell.concurrency})
    rows = []
    for level in levels:
        arms, runs = noise.get(level, ([], []))
        spread = sequential.pooled_spread(arms)
        expected = None if spread is None else sequential.trials_expected(
            0.0, spread, n=first, higher_is_better=False, alpha=alpha, min_effect=gate.min_effect_pct / 100,
            first=first, cap=gate.max_trials, bias=gate.server_bias_pct / 100)
        rows.append(LevelNoise(concurrency=level, trials=sum(len(arm) for arm in arms), runs=runs,
                               cv_pct=None if spread is None else round(100 * spread, 3),
                               expected_trials_per_arm=expected))
    return Rounds(min_trials=first, max_trials=gate.max_trials, objective=gate.objective, guards=list(gate.guards),
                  min_effect_pct=gate.min_effect_pct, server_bias_pct=gate.server_bias_pct,
                  alpha_per_side=alpha, rule=ROUND_RULE, noise=rows)


def _operator_values(
    campaign: Campaign, cell: Cell, run_id: str, spec: dict[str, Any] | None, *, training_output: str | None, host: str
) -> dict[str, str]:
    """What fills an operator serve template: every declared serving field
    (contracts/templates/values.serve_values; `specdec submit` refused templates that
    drop one) and where the server runs; `{port}` is filled at launch."""
    values = {
        "run_id": run_id,
        "target": campaign.target.checkpoint,
        "tokenizer": campaign.target.tokenizer_dir,
        "host": host,
        "port": PORT_PLACEHOLDER,
        **serve_values(cell.serving, model=cell.serving.model or campaign.target.checkpoint,
                       max_model_len=campaign.target.max_model_len, speculative=spec),
    }
    if training_output:
        values["training.output"] = training_output
    return values


def _launch_order(cells: list[CellPlan], run_id: str, cap: int | None = None) -> list[Launch]:
    """Warm cells: one launch each, in order. Cold cells: one launch per trial,
    cells interleaved across trials (trial 0 of every cell, then trial 1, ...).
    Warm-interleaved cells: one launch each, in an order shuffled per run
    (interleave.launch_order), all up at once (their trials run in the plan's blocks, up to the
    rounds' cap when there is one)."""
    launches = [Launch(cell_id=c.cell_id, trials=list(range(c.trials))) for c in cells if c.regime == "warm"]
    cold = [c for c in cells if c.regime == "cold"]
    for trial in range(max((c.trials for c in cold), default=0)):
        launches += [Launch(cell_id=c.cell_id, trials=[trial]) for c in cold if trial < c.trials]
    by_id = {c.cell_id: c for c in cells}
    launches += [Launch(cell_id=cell_id, trials=list(range(cap or by_id[cell_id].trials)))
                 for cell_id in launch_order(run_id, cells)]
    return launches


def _warmup(requests: int, *, interleaved: bool) -> str:
    if not interleaved:
        return f"{requests} requests per server start and concurrency level, excluded from every figure"
    return (f"{requests} requests before every measured window (each cell's turn in each block, at each concurrency "
            "level), so every server is warmed again after the other cells' windows; excluded from every figure")


def _placed(
    launch: Launch, cell: CellPlan, index: int, campaign: Campaign, *, run_id: str, run_dir: str, cwd: str,
    readiness_timeout_s: float, template: dict[str, Any] | None,
) -> Launch:
    """The launch with its scheduler block: exactly what will be submitted for it."""
    selectors = campaign.capacity.selectors
    folder = layout.launch_folder(cell.cell_id, index)
    if campaign.capacity.scheduler == "slurm":
        block = slurm_job.render_launch(cell.serve_argv, run_id=run_id, node=cell.node, selectors=selectors,
                                    run_dir=run_dir, cwd=cwd, folder=folder)
        return launch.model_copy(update={"slurm": block})
    pod = kubernetes_pod.render_launch(
        cell.serve_argv, run_id=run_id, index=index, cell_id=cell.cell_id, node=cell.node, selectors=selectors,
        run_dir=run_dir, cwd=cwd, folder=folder, hardware=cell.identity["hardware"],
        tensor_parallel_size=int(cell.identity["parallelism"].removeprefix("tp=")),
        readiness_timeout_s=readiness_timeout_s, template=template,
    )
    return launch.model_copy(update={"kubernetes": pod})


def _changes(executor: str, launches: list[Launch], run_id: str, *, interleaved: bool = False) -> list[str]:
    keep = "the standing production config is never changed; nothing is preempted"
    # Warm-interleaved: every server is up at once, from the first start to the last block.
    when = "all up at once until the last block" if interleaved else "one at a time"
    if executor == "slurm":
        return [f"submit {len(launches)} batch job(s) named {slurm.job_name(run_id)} with comment "
                f"{slurm.comment(run_id)}, {when}, each pinned to its cell's node (sbatch argv per launch "
                "above); each job picks a free port on its node and serves there", keep]
    if executor == "kubernetes":
        return [f"create {len(launches)} Pod(s) labelled experiment={run_id}, {when}, each pinned to its "
                "cell's node (manifest and kubectl argv per launch above); each is reached by kubectl port-forward",
                keep]
    return [f"start {len(launches)} vLLM server(s) on free ports, {when}, labelled experiment={run_id}", keep]


def _cleanup(executor: str, launches: list[Launch], run_id: str, *, interleaved: bool = False) -> list[str]:
    if interleaved:
        # The label-selected cleanup stays; only when each server stops differs.
        stop = {"slurm": "scancel its job", "kubernetes": "capture kubectl logs into the bundle, then delete its Pod",
                "local": f"stop its server's process group (label experiment={run_id})"}[executor]
        first = (f"after the last block (a cell that failed: after the block it failed in): {stop} once results "
                 "and hashes are captured")
        return [first, *_cleanup(executor, launches, run_id)[1:]]
    if executor == "slurm":
        return [
            "after each launch: scancel its job once results and hashes are captured",
            f"before the first launch and after the last, whatever happened (failure, interruption, a restarted "
            f"runner): scancel every job named {slurm.job_name(run_id)} whose comment is {slurm.comment(run_id)} "
            "(squeue, selected by that label only)",
        ]
    if executor == "kubernetes":
        selector = kubernetes_pod.label_selector(run_id)
        return [
            "after each launch: capture kubectl logs into the bundle, then delete its Pod",
            f"before the first launch and after the last, whatever happened: kubectl delete pods -l {selector} "
            "(selected by that label only)",
        ]
    return [
        f"after each cell: stop its server's process group (label experiment={run_id}) once results and hashes are "
        f"captured",
        f"after the last launch, whatever happened, and on interruption or restart: kill every process labelled "
        f"experiment={run_id} of the bench-runner, by label only",
    ]
