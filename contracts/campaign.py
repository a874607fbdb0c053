"""The campaign file (DESIGN.md, "The campaign file"), version 1.

A campaign is one YAML document. `missing_inputs()` names every input the
workflow needs that a raw campaign lacks, all at once, before pydantic's type
checks: an operator fixes a campaign in one pass, not one error at a time.
"""

from __future__ import annotations

import re
from pathlib import PurePosixPath
from typing import Any, Literal

from pydantic import Field, SerializerFunctionWrapHandler, field_validator, model_serializer, model_validator

from contracts.argv import ArgvTemplate
from contracts.envelope import Key, Strict
from contracts.schedule import schedule_problems

CAMPAIGN_VERSION = 1
# The gate's noise estimate (Welch interval, A/A bound over an arm's trials) needs two trials per arm.
GATE_MIN_TRIALS = 2
# The workflow asks for at least three matched trials per arm; fewer only in an exploratory matrix.
GATE_MIN_TRIALS_CAMPAIGN = 3
# The smallest relative change the gate counts as one, in % (docs/gate.md "Minimum effect": the known-truth
# simulation in tests/perf/bench_sequential.py meets its targets at 1 % and 1.5 %, misses power at 2 %).
DEFAULT_MIN_EFFECT_PCT = 1.0
# gate.max_trials: the most trials per arm a campaign's rounds may ask for.
MAX_TRIALS_CAP = 100
# The label of prompts drawn from the corpus's heldout split (a campaign with traffic).
HELDOUT_SHAPE = "corpus-heldout"

SpecMethod = Literal["ngram", "suffix", "draft_model", "eagle", "eagle3", "mtp", "medusa"]
# Methods whose proposer is a separate model checkpoint.
METHODS_WITH_MODEL = frozenset({"draft_model", "eagle", "eagle3", "medusa"})
# The suffix method's own keys (SpeculativeConfig below), passed to vLLM and read back like the rest.
SUFFIX_KEYS: tuple[str, ...] = ("suffix_decoding_max_tree_depth", "suffix_decoding_max_cached_requests",
                                "suffix_decoding_max_spec_factor", "suffix_decoding_min_token_prob")
Scheduler = Literal["local", "slurm", "kubernetes"]
# The steps that change the cluster and so pass the review point (services/runtime/review.py).
ReviewedStep = Literal["training", "bench"]
REVIEWED_STEPS: tuple[str, ...] = ("training", "bench")
# What review.pre_approve may name: the reviewed steps (their plans) and `publish`, a live external publish
# of the final report from the dry run the publisher records first (services/publisher/publish/publish_review.py).
# Publish has no plan and changes no cluster: the review point never waits on it (REVIEWED_STEPS).
PreApprovedStep = Literal["training", "bench", "publish"]
PRE_APPROVABLE_STEPS: tuple[str, ...] = (*REVIEWED_STEPS, "publish")
# Publish targets whose files leave this machine (services/publisher/publish/publish.py is_external).
EXTERNAL_PUBLISH = ("s3://", "https://", "http://")
# The speculative model that names the draft this campaign trains.
TRAINED_DRAFT = "{training.output}"
OBJECTIVE_RE = re.compile(
    r"^(ttft|tpot|itl|e2el|output_throughput|acceptance_rate|acceptance_length)(:(mean|median|p[0-9]{1,2}(\.[0-9]+)?))?$"
)
# The gate decides on a latency objective only (contracts/trials.py LATENCY_METRICS, kept in step by a
# unit test); throughput and acceptance are guard metrics. A latency takes a statistic over a trial's
# requests; the other metrics are one figure per trial.
LATENCY_OBJECTIVES: tuple[str, ...] = ("ttft", "tpot", "itl", "e2el")


class Target(Strict):
    """The served model the campaign speeds up."""

    checkpoint: str = Field(min_length=1, description="Path of the target checkpoint directory.")
    tokenizer: str | None = Field(default=None, description="Tokenizer directory; the checkpoint when unset.")
    max_model_len: int = Field(default=2048, ge=16, description="Maximum model length the target is served with.")

    @property
    def tokenizer_dir(self) -> str:
        return self.tokenizer or self.checkpoint


class SpeculativeConfig(Strict):
    """A speculative-decoding config; becomes vLLM's --speculative-config JSON."""

    method: SpecMethod = Field(description="Speculative method.")
    num_speculative_tokens: int = Field(ge=1, le=32, description="Tokens proposed per step (k).")
    model: str | None = Field(
        default=None,
        description="Draft/proposer checkpoint for draft_model, eagle, eagle3, medusa; "
        "'{training.output}' names the draft this campaign trains.",
    )
    prompt_lookup_min: int | None = Field(default=None, ge=1, description="ngram: smallest n-gram to match.")
    prompt_lookup_max: int | None = Field(default=None, ge=1, description="ngram: largest n-gram to match.")
    draft_tensor_parallel_size: int | None = Field(default=None, ge=1, description="Tensor parallel size of the draft.")
    # suffix: vLLM's SpeculativeConfig keys of the same names (its defaults 24, 10000, 1.0, 0.1 when unset).
    suffix_decoding_max_tree_depth: int | None = Field(
        default=None, ge=1, description="suffix: deepest suffix tree (prefix match plus draft length).")
    suffix_decoding_max_cached_requests: int | None = Field(
        default=None, ge=0, description="suffix: requests kept in the global tree (FIFO); 0 disables it.")
    suffix_decoding_max_spec_factor: float | None = Field(
        default=None, ge=0, description="suffix: draft length at most this times the prefix match length.")
    suffix_decoding_min_token_prob: float | None = Field(
        default=None, ge=0, le=1, description="suffix: smallest estimated probability of a drafted token.")
    num_speculative_tokens_per_batch_size: list[tuple[int, int, int]] | None = Field(
        default=None,
        description="A k per batch size: [[start_bs, end_bs, k], ...], inclusive non-overlapping ascending ranges, "
        "the first starting at 1, each k from 0 to num_speculative_tokens (vLLM's dynamic speculation; "
        "contracts/schedule.py). None: k every step.",
    )

    @model_validator(mode="after")
    def _check_schedule(self) -> SpeculativeConfig:
        entries = self.num_speculative_tokens_per_batch_size
        problems = [] if entries is None else schedule_problems(entries, self.num_speculative_tokens)
        if problems:
            raise ValueError("num_speculative_tokens_per_batch_size: " + "; ".join(problems))
        return self

    @model_validator(mode="after")
    def _check_method_fields(self) -> SpeculativeConfig:
        if self.method in METHODS_WITH_MODEL and not self.model:
            raise ValueError(f"speculative method {self.method} needs `model` (a checkpoint or '{{training.output}}')")
        if self.method in ("ngram", "suffix", "mtp") and self.model:
            raise ValueError(f"speculative method {self.method} takes no `model`")
        lookup = (self.prompt_lookup_min, self.prompt_lookup_max)
        if self.method != "ngram" and any(v is not None for v in lookup):
            raise ValueError("prompt_lookup_min/max apply to the ngram method only")
        if self.method != "suffix" and any(getattr(self, key) is not None for key in SUFFIX_KEYS):
            raise ValueError("suffix_decoding_* apply to the suffix method only")
        if None not in lookup and lookup[0] > lookup[1]:  # type: ignore[operator]
            raise ValueError("prompt_lookup_min must not exceed prompt_lookup_max")
        return self

    @property
    def needs_training(self) -> bool:
        return self.model == TRAINED_DRAFT


class TrafficFile(Strict):
    """Representative traffic as JSONL (formats: docs/profiler.md)."""

    path: str = Field(min_length=1, description="Path of the traffic JSONL file.")
    reject_threshold: float = Field(
        default=0.05, ge=0, le=1, description="Share of malformed lines above which profiling fails."
    )


class TrafficShapes(Strict):
    """Named synthetic workload shapes instead of traffic; no corpus, no training."""

    shapes: list[str] = Field(
        min_length=1,
        description="Names of bundled workload shapes, every one profiled and benched: matrix.load.num_prompts is "
        "split across them in turn (prompt i from shape i mod n, the first shapes taking the remainder).",
    )


class CorpusSpec(Strict):
    """How the training corpus is drawn from the traffic."""

    size: int | None = Field(
        default=None, ge=1, description="Records to draw; None takes the largest set that still matches the profile."
    )
    heldout_share: float = Field(default=0.1, gt=0, lt=1, description="Share of records in the heldout split.")
    seed: int = Field(default=0, description="Seed of the stratified sampling and the split.")


class ArgvCommand(Strict):
    """An operator command as an argv template."""

    argv: ArgvTemplate = Field(description="Argv template; no shell, whitelisted {placeholders}.")


def checked_subdir(value: str) -> str:
    """`value` as a folder below {output_dir} (normalised: 'a//b/' is 'a/b'); ValueError naming why not."""
    what = f"commands.train.checkpoint_subdir {value!r}"
    if not value.strip():
        raise ValueError(f"{what} is empty: give the checkpoint's folder relative to {{output_dir}}, or null for it")
    if "\0" in value or "\\" in value:
        raise ValueError(f"{what} holds a NUL or a backslash: name folders with '/' between them")
    if value.startswith("/") or re.match(r"^[A-Za-z]:", value):
        raise ValueError(f"{what} is absolute: give a folder relative to {{output_dir}} ('9' for --epochs 10)")
    parts = PurePosixPath(value).parts
    if ".." in parts:
        raise ValueError(f"{what} climbs out of {{output_dir}} with '..': the checkpoint must lie below it")
    if "{" in value or "}" in value:
        raise ValueError(f"{what} holds a brace: it is a literal folder name, no placeholder is filled in it")
    normalised = PurePosixPath(*[part for part in parts if part != "."]).as_posix() if parts else "."
    if normalised == ".":
        raise ValueError(f"{what} names {{output_dir}} itself: leave it null")
    return normalised


class TrainCommand(Strict):
    """The operator's trainer."""

    argv: ArgvTemplate = Field(description="Trainer argv template.")
    probe: ArgvTemplate | None = Field(
        default=None, description="Optional capture-correctness probe, run on the output; non-zero exit fails training."
    )
    timeout_s: float = Field(default=3600.0, gt=0, description="Wall-time limit; past it the trainer and its children are killed.")
    kubernetes_job: str | None = Field(
        default=None,
        description="Path of the operator's Kubernetes Job manifest template (YAML), used with scheduler kubernetes; "
        "specdec sets its name, experiment label, command, node and deadline. Unset: specdec renders a Job itself.",
    )
    reuse: bool = Field(
        default=True,
        description="Reuse the draft of an earlier run in the same bundle root whose training inputs were identical "
        "(same training input key: train split, argv, target files, revisions, probe, executor) and whose draft files "
        "still hash as recorded; the plan names that run before approval and nothing is launched. false: always train.",
    )
    checkpoint_subdir: str | None = Field(
        default=None,
        description="The checkpoint's folder relative to {output_dir}, for trainers that save below it (speculators "
        "train: the last epoch's folder, '9' for --epochs 10). The probes, the draft cost, {training.output} and the "
        "training.completed event use {output_dir}/<checkpoint_subdir>; every file under {output_dir} is still hashed "
        "and kept. A relative path without '..'; part of the training input key. Unset: {output_dir} itself.",
    )

    @field_validator("checkpoint_subdir")
    @classmethod
    def _relative_subdir(cls, value: str | None) -> str | None:
        if value is None:
            return None
        return checked_subdir(value)


Builtin = Literal["builtin"]


class Commands(Strict):
    """The operator's commands. serve, bench and eval must be set, to an argv or to 'builtin'."""

    train: TrainCommand | None = Field(
        default=None,
        description="Trainer; required when a cell serves '{training.output}' (traffic campaigns only), refused when "
        "none does (nothing would run it).",
    )
    serve: ArgvCommand | Builtin | None = Field(default=None, description="Serve command, or 'builtin' (vLLM's OpenAI server).")
    bench: ArgvCommand | Builtin | None = Field(default=None, description="Bench command, or 'builtin' (specdec's load generator).")
    eval: ArgvCommand | Builtin | None = Field(default=None, description="Eval command, or 'builtin' (agreement with the standing cell).")
    serve_pod_template: str | None = Field(
        default=None,
        description="Path of the operator's Kubernetes Pod manifest template (YAML) for the bench servers, used with "
        "capacity.scheduler kubernetes; specdec sets its name, experiment label, command, port, node and readiness "
        "probe, and keeps the operator's image, resources, volumes and the rest. Unset: specdec renders a Pod itself.",
    )


class CapacitySpec(Strict):
    """Where the campaign may run, and the operator's idle-node check."""

    scheduler: Scheduler = Field(default="local", description="Scheduler to read and launch on.")
    selectors: dict[str, str] = Field(
        default_factory=dict,
        description="Scheduler selectors (string values); the keys per scheduler, their meaning and their "
        "consumers are contracts/selectors.py: slurm partition/nodelist/gres, kubernetes label_selector/"
        "tolerations/image/namespace/bundle_pvc/cpu/memory/gpu_resource, local: none.",
    )
    idle_check: ArgvTemplate | None = Field(
        default=None, description="Operator's idle-node check; exit status 0 means idle. Required."
    )


class ServingConfig(Strict):
    """Typed serving config of a cell; every field maps to one vLLM argument."""

    model: str | None = Field(default=None, description="Model served; the campaign target's checkpoint when unset.")
    dtype: str = Field(default="auto", description="--dtype.")
    quantization: str | None = Field(default=None, description="--quantization; None for none.")
    tensor_parallel_size: int = Field(default=1, ge=1, description="--tensor-parallel-size.")
    graph_mode: Literal["eager", "graph"] = Field(default="eager", description="eager adds --enforce-eager.")
    max_num_seqs: int | None = Field(default=None, ge=1, description="--max-num-seqs.")
    speculative: SpeculativeConfig | None = Field(default=None, description="--speculative-config; None for no speculation.")


class VllmSweep(Strict):
    """Optional operator commands of a cell; without them specdec builds both."""

    serve_cmd: ArgvTemplate | None = Field(default=None, description="Operator serve argv template.")
    bench_cmd: ArgvTemplate | None = Field(default=None, description="Operator bench argv template.")


class Cell(Strict):
    """One arm of the comparison."""

    cell_id: Key = Field(description="Unique cell ID; a path component of the bundle.")
    role: Literal["standing", "candidate"] = Field(description="standing (the baseline) or candidate.")
    hardware: str = Field(default="cpu", description="Hardware label (identity).")
    workload_shape: str | None = Field(
        default=None,
        description="Workload shape label (identity), derived from where the prompts come from when unset: "
        "'corpus-heldout' for traffic, the shape names joined by '+' for shapes; another value is refused.",
    )
    concurrency: list[int] = Field(default_factory=lambda: [1], min_length=1, description="Concurrency levels measured.")
    regime: Literal["warm", "cold", "warm-interleaved"] = Field(
        default="warm",
        description="warm: one server per cell, its trials back to back, cells one after another; cold: one server "
        "per trial; warm-interleaved: every cell's server up at once, trial b of every cell in block b, the cells "
        "in a seeded random order per block (every cell of the matrix, or none).",
    )
    trials: int = Field(default=3, ge=1, description="Trials per concurrency level.")
    node: str | None = Field(default=None, description="Node to serve on; the capacity step's choice when unset.")
    source_revision: str | None = Field(default=None, description="Serving stack revision (identity).")
    serving: ServingConfig = Field(default_factory=ServingConfig, description="Typed serving config.")
    vllm_sweep: VllmSweep = Field(default_factory=VllmSweep, description="Optional operator serve/bench commands.")


class LoadSpec(Strict):
    """The measured load, identical for every cell (a controlled comparison)."""

    endpoint: Literal["completions", "chat"] = Field(default="completions", description="/v1/completions or /v1/chat/completions.")
    num_prompts: int = Field(default=32, ge=1, description="Measured requests per trial and concurrency level.")
    warmup_requests: int = Field(default=4, ge=0, description="Requests sent before each measured window; excluded from every figure.")
    request_rate: float | None = Field(default=None, gt=0, description="Requests/s; None sends as fast as the concurrency allows.")
    burstiness: float = Field(
        default=1.0, gt=0,
        description="Gamma shape of inter-arrivals: 1 is Poisson, lower is burstier; needs request_rate (else refused).",
    )
    max_output_tokens: int | None = Field(
        default=None, ge=1, description="Output length cap; None takes each prompt's length from the profile/corpus."
    )
    ignore_eos: bool | None = Field(
        default=None,
        description="Generate exactly each prompt's output length, past the end-of-sequence token. None: true for "
        "shapes (a shape fixes the output length), false for traffic prompts (they end where the model ends them).",
    )
    client_processes: int = Field(
        default=1, ge=1, le=64,
        description="Processes of specdec's builtin load generator that drive each window together, their "
        "per-request records merged into one window on one clock (docs/bench-loadgen.md, \"Several client "
        "processes\"): for servers that stream more chunks per second than one client core receives. Each process "
        "needs a request in flight, so every cell's lowest concurrency level must be at least this; an operator "
        "bench command drives its own load, so more than 1 is refused beside one.",
    )

    @model_validator(mode="after")
    def _check_arrivals(self) -> LoadSpec:
        # Without a rate every request is sent at once: there are no gaps for a gamma shape to shape.
        if self.request_rate is None and self.burstiness != 1.0:
            raise ValueError(
                f"matrix.load.burstiness {self.burstiness:g} needs matrix.load.request_rate: without a rate every "
                "request is sent at once and there are no inter-arrivals to shape; set request_rate (requests/s) "
                "or remove burstiness"
            )
        return self

    def effective_ignore_eos(self, *, shapes: bool) -> bool:
        """What every prompt of the window gets: the operator's value, else the prompt source's default."""
        return effective_ignore_eos(self.ignore_eos, shapes=shapes)


def effective_ignore_eos(value: bool | None, *, shapes: bool) -> bool:
    """`matrix.load.ignore_eos` as it is sent: an explicit value for either prompt source, else true for
    shapes (a shape fixes the output length) and false for traffic's heldout prompts."""
    return shapes if value is None else value


class Matrix(Strict):
    """The cells of the comparison, inline."""

    cells: list[Cell] = Field(min_length=1, description="Cells: one standing, one or more candidates.")
    load: LoadSpec = Field(default_factory=LoadSpec, description="The measured load, the same for every cell.")
    exploratory: bool = Field(
        default=False,
        description="Run as an exploratory DRAFT: fewer than 3 trials per cell are allowed, and the bench results "
        "(bench.completed, the plan), the gate's decision and the report are marked DRAFT, whatever the trial counts.",
    )

    @model_validator(mode="after")
    def _check_cells(self) -> Matrix:
        ids = [cell.cell_id for cell in self.cells]
        if len(ids) != len(set(ids)):
            raise ValueError(f"duplicate cell_id in matrix: {sorted({i for i in ids if ids.count(i) > 1})}")
        if sum(cell.role == "standing" for cell in self.cells) != 1:
            raise ValueError("a matrix needs exactly one standing cell")
        # Interleaving rotates the trials across every cell's server so that drift hits every arm
        # alike; a cell outside the rotation would not share it (and the gate refuses arms whose
        # regimes differ: regime is a compared identity field, contracts/results.py).
        interleaved = [cell.cell_id for cell in self.cells if cell.regime == "warm-interleaved"]
        if interleaved and len(interleaved) != len(self.cells):
            others = {cell.cell_id: cell.regime for cell in self.cells if cell.regime != "warm-interleaved"}
            raise ValueError(
                f"matrix.cells {interleaved} are regime warm-interleaved but {others} are not: warm-interleaved "
                "rotates the trials across every cell's server, so set regime: warm-interleaved on every cell, "
                "or on none"
            )
        # The builtin load generator splits a window's concurrency cap over its client processes;
        # a level below the process count would leave a process with nothing to send.
        low = {cell.cell_id: min(cell.concurrency) for cell in self.cells
               if min(cell.concurrency) < self.load.client_processes}
        if low:
            raise ValueError(
                f"matrix.load.client_processes {self.load.client_processes} splits each window's concurrency over "
                f"that many client processes, and each needs a request in flight, but cells {low} have a lower "
                "concurrency level: lower client_processes or raise those levels"
            )
        return self

    def for_traffic(self, *, shapes: bool) -> Matrix:
        """This matrix with the load's traffic-dependent default decided (`ignore_eos`), as the bench
        plan carries it: the builtin load generator, an operator bench's placeholders and the
        prompts file then all see one value."""
        if self.load.ignore_eos is not None:
            return self
        load = self.load.model_copy(update={"ignore_eos": self.load.effective_ignore_eos(shapes=shapes)})
        return self.model_copy(update={"load": load})


class MatrixFile(Strict):
    """The matrix as a path to a YAML file of the same form."""

    path: str = Field(min_length=1, description="Path of the matrix YAML file.")


class GateSpec(Strict):
    """What a candidate must show to be promoted."""

    objective: str | None = Field(
        default=None,
        description="Latency objective the candidate must improve: ttft, tpot, itl or e2el, optionally :median "
        "(default), :mean or :pNN, e.g. tpot, tpot:p99. Required.",
    )
    acceptance_floor: float | None = Field(default=None, ge=0, le=1, description="Minimum acceptance rate.")
    acceptance_length_floor: float | None = Field(default=None, ge=1, description="Minimum mean acceptance length.")
    accuracy_floor: float | None = Field(default=None, ge=0, le=1, description="Minimum eval accuracy or agreement.")
    min_trials: int = Field(
        default=3, ge=1,
        description=f"Trials per arm below which the gate is inconclusive; at least {GATE_MIN_TRIALS} (the noise estimate needs two).",
    )
    guards: list[str] = Field(
        default_factory=list,
        description="Metrics a candidate must not worsen, METRIC[:STAT] each (output_throughput, acceptance_rate, "
        "acceptance_length, or a latency such as ttft:p99): worse beyond the minimum effect on any of them rejects it.",
    )
    min_effect_pct: float = Field(
        default=DEFAULT_MIN_EFFECT_PCT, ge=0, lt=100,
        description="Smallest change that counts, in % of the baseline: the objective is better only when its whole "
        "interval lies beyond this improvement, worse (and a guard worse) only when beyond this deterioration.",
    )
    server_bias_pct: float = Field(
        default=0.0, ge=0, lt=100,
        description="Systematic difference between two servers of one config, in %, as measured by A/A campaigns "
        "on this target and hardware: widens every interval by this much on both sides. 0 (the default) when "
        "none was measured.",
    )
    max_trials: int | None = Field(
        default=None, ge=GATE_MIN_TRIALS, le=MAX_TRIALS_CAP,
        description="Sequential rounds: the most trials per arm and concurrency level the bench may run (a hard "
        "ceiling on server time, in the approved plan). The bench runs min_trials, then one more trial per arm "
        "and level each round until every level is decided or this cap; every cell must then be warm-interleaved "
        "and run min_trials as its `trials`. None (the default): each cell runs its fixed `trials`.",
    )

    @model_validator(mode="after")
    def _check_max_trials(self) -> GateSpec:
        if self.max_trials is not None and self.max_trials < self.min_trials:
            raise ValueError(
                f"gate.max_trials {self.max_trials} is below gate.min_trials {self.min_trials}: the cap must allow "
                "the minimum trials per arm; raise gate.max_trials or remove it"
            )
        return self

    @model_serializer(mode="wrap")
    def _without_absent_max_trials(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        # A campaign without a cap stores (and a decision echoes) its gate spec byte for byte as before the field.
        data = handler(self)
        if data.get("max_trials") is None:
            data.pop("max_trials", None)
        return data

    @field_validator("min_trials")
    @classmethod
    def _check_min_trials(cls, value: int) -> int:
        if value < GATE_MIN_TRIALS:
            raise ValueError(
                f"gate.min_trials {value} cannot be honoured: the gate tells a difference from noise with each arm's "
                f"trial-to-trial spread, which needs at least {GATE_MIN_TRIALS} trials per arm; set gate.min_trials "
                f"to {GATE_MIN_TRIALS} or more"
            )
        return value

    @model_validator(mode="after")
    def _check_objective(self) -> GateSpec:
        problems = []
        if self.objective is not None:
            problems += _metric_problems("gate.objective", self.objective)
            metric = self.objective.partition(":")[0]
            if not problems and metric not in LATENCY_OBJECTIVES:
                floor = " (or gate.acceptance_floor / gate.acceptance_length_floor for a minimum)" \
                    if metric.startswith("acceptance") else ""
                problems.append(
                    f"gate.objective {self.objective!r} is not a latency metric: the gate promotes only a candidate "
                    f"that improves a latency objective (ttft, tpot, itl or e2el, optionally :median, :mean or :pNN); "
                    f"{metric} can be a guard: list it under gate.guards{floor}, so a candidate worse on it is rejected"
                )
        seen = {_metric_key(self.objective)} if self.objective is not None and not problems else set()
        for guard in self.guards:
            found = _metric_problems(f"gate.guards item {guard!r}", guard, guard=True)
            if not found and _metric_key(guard) in seen:
                found = [f"gate.guards item {guard!r} repeats the objective or another guard: list each metric once"]
            seen.add(_metric_key(guard))
            problems += found
        if problems:
            raise ValueError("; ".join(problems))
        return self


def _metric_problems(where: str, text: str, *, guard: bool = False) -> list[str]:
    """Why `text` is not a usable METRIC[:STAT]; empty when it is."""
    match = OBJECTIVE_RE.match(text)
    if not match:
        return [f"{where} is not METRIC[:STAT] with METRIC one of ttft, tpot, itl, e2el, output_throughput, "
                "acceptance_rate, acceptance_length and STAT mean, median or pNN"]
    metric, _, stat = text.partition(":")
    if stat.startswith("p") and not 0 < float(stat[1:]) < 100:
        return [f"{where}: percentile {stat!r} must lie strictly between p0 and p100"]
    if guard and stat and metric not in LATENCY_OBJECTIVES:
        return [f"{where}: {metric} is one figure per trial, so a statistic does not apply: write {metric!r}"]
    return []


def _metric_key(text: str | None) -> tuple[str, str | None]:
    """(metric, statistic) with the statistic normalised: `ttft` is `ttft:median`, `tpot:p99.0` is `tpot:p99`."""
    metric, _, stat = (text or "").partition(":")
    if metric not in LATENCY_OBJECTIVES:
        return metric, None
    stat = stat or "median"
    if stat.startswith("p"):
        p = float(stat[1:])
        stat = "p" + (str(int(p)) if p == int(p) else str(p))
    return metric, stat


class PublishSpec(Strict):
    """Where the report goes. Live publishing also needs the acknowledgement."""

    target: str = Field(
        default="file://published",
        description="file://DIR, https://URL (http:// too) or s3://BUCKET/PREFIX; relative file paths are under the bundle.",
    )

    @model_validator(mode="after")
    def _check_target(self) -> PublishSpec:
        if not self.target.startswith(("file://", "https://", "http://", "s3://")):
            raise ValueError(
                f"publish target {self.target!r} must start with file://, https://, http:// or s3:// "
                "(file://DIR, https://URL or s3://BUCKET/PREFIX)"
            )
        return self


class ReviewPolicy(Strict):
    """The review point (DESIGN.md): which stored plans run without a separate approval."""

    pre_approve: list[PreApprovedStep] = Field(
        default_factory=list,
        description="Reviewed steps (training, bench) whose plan runs as soon as it is stored and announced, without "
        "a `specdec approve` naming its sha256, and publish: the publisher sends the final report live to the "
        "external publish.target (s3://, https://, http://) from the dry run it records first; each step once. "
        "training and bench need acknowledgements.i_understand_this_mutates_cluster: true (a policy is a mutation "
        "approval), publish needs acknowledgements.i_understand_this_publishes_externally: true and an external "
        "target. Empty (the default): every plan waits for an approval naming its hash, and an external publish "
        "stays a dry run until a call carrying the acknowledgement publishes it. Recorded in the bundle "
        "(campaign.json) and the report.",
    )

    @field_validator("pre_approve")
    @classmethod
    def _check_repeats(cls, value: list[str]) -> list[str]:
        repeated = sorted({step for step in value if value.count(step) > 1})
        if repeated:
            raise ValueError(f"review.pre_approve repeats {', '.join(repeated)}: list each step once")
        return value


class Acknowledgements(Strict):
    """Typed acknowledgements; both default to false."""

    i_understand_this_mutates_cluster: bool = Field(
        default=False,
        description="Acknowledge that this run's plans change the cluster. Alone it runs nothing: every plan is "
        "stored, announced and waits for `specdec approve` naming its sha256; review.pre_approve, which needs it, "
        "names the steps whose plans run without that approval.",
    )
    i_understand_this_publishes_externally: bool = Field(
        default=False,
        description="Allow a live publish of the report to the publish target. To a folder (file://) it alone makes "
        "the publisher's publish live; to an external target (s3://, https://, http://) it takes effect only with "
        "review.pre_approve listing publish, which needs it: alone it publishes nothing live there (accepted but "
        "inert, contracts/inert.py), the dry run waits for a call carrying the acknowledgement.",
    )


class SourceRevisions(Strict):
    """Revisions of everything the evidence depends on."""

    target: str | None = Field(
        default=None,
        description="Revision of the target checkpoint: enters the training input key; where nothing is trained "
        "(traffic.shapes, or no cell serves '{training.output}') a provenance label only, accepted but inert "
        "(contracts/inert.py).",
    )
    trainer: str | None = Field(
        default=None,
        description="Revision of the operator's trainer: enters the training input key; refused where nothing is "
        "trained (traffic.shapes, or no cell serves '{training.output}').",
    )
    serving: str | None = Field(default=None, description="Revision of the serving stack.")
    specdec: str | None = Field(default=None, description="specdec's own revision; filled in at submit.")
    suffix_decoding: str | None = Field(
        default=None, description="arctic-inference's version in the suffix cells' serving interpreter "
        "(arctic-inference==X); filled in at submit, None without a suffix cell.")


class Campaign(Strict):
    """A speculative-decoding campaign."""

    version: Literal[1] = Field(default=CAMPAIGN_VERSION, description="Campaign file version.")
    family: str = Field(pattern=r"^[a-z0-9][a-z0-9-]{0,30}$", description="Model family label used in names and reports.")
    target: Target = Field(description="The target model.")
    standing: SpeculativeConfig | None = Field(description="Speculative config served today; null for none.")
    traffic: TrafficFile | TrafficShapes = Field(description="Traffic JSONL path, or named workload shapes.")
    corpus: CorpusSpec = Field(default_factory=CorpusSpec, description="Corpus size, heldout share and seed.")
    commands: Commands = Field(description="The operator's commands.")
    capacity: CapacitySpec = Field(description="Scheduler, selectors and the idle-node check.")
    matrix: Matrix | MatrixFile = Field(description="The cells, inline or as a path.")
    gate: GateSpec = Field(description="Objective and floors.")
    publish: PublishSpec = Field(default_factory=PublishSpec, description="Report target.")
    review: ReviewPolicy = Field(
        default_factory=ReviewPolicy,
        description="The review point's pre-approval policy; by default every plan waits for an approval of its hash.",
    )
    acknowledgements: Acknowledgements = Field(default_factory=Acknowledgements, description="Typed acknowledgements.")
    source_revisions: SourceRevisions = Field(default_factory=SourceRevisions, description="Source revisions.")

    @property
    def shapes_only(self) -> bool:
        return isinstance(self.traffic, TrafficShapes)

    @property
    def trains_nothing(self) -> bool:
        """True when no training can run: named shapes, or an inline matrix no cell of which serves the
        trained draft. A matrix still given as a path is unknown here (False): submit inlines it and validates again."""
        if self.shapes_only:
            return True
        return isinstance(self.matrix, Matrix) and not any(
            cell.serving.speculative is not None and cell.serving.speculative.needs_training for cell in self.matrix.cells
        )

    @model_validator(mode="after")
    def _check_complete(self) -> Campaign:
        missing = missing_inputs(self.model_dump(by_alias=True))
        if missing:
            raise ValueError("campaign lacks required inputs: " + "; ".join(missing))
        unread = [g for g in self.gate.guards if g.startswith("acceptance")] if self.standing is None else []
        if unread:
            raise ValueError(
                f"gate.guards {unread}: the standing config is null (no speculation), so the baseline has no "
                "acceptance figure to compare with; set gate.acceptance_floor or gate.acceptance_length_floor for "
                "a minimum instead, or remove the guard"
            )
        if self.shapes_only and isinstance(self.matrix, Matrix):
            for cell in self.matrix.cells:
                spec = cell.serving.speculative
                if spec is not None and spec.needs_training:
                    raise ValueError(
                        f"cell {cell.cell_id} needs a trained draft, but a shapes-only campaign has no traffic "
                        "to train on: use ngram/suffix or name an existing draft checkpoint"
                    )
        return self

    @model_validator(mode="after")
    def _check_gate_trials(self) -> Campaign:
        # An inline matrix only: a matrix given as a path is read and stored inline at submit, and the
        # stored campaign is validated again there.
        if (isinstance(self.matrix, Matrix) and not self.matrix.exploratory
                and self.gate.min_trials < GATE_MIN_TRIALS_CAMPAIGN):
            raise ValueError(
                f"gate.min_trials {self.gate.min_trials} is below {GATE_MIN_TRIALS_CAMPAIGN}: a campaign needs at "
                f"least {GATE_MIN_TRIALS_CAMPAIGN} matched trials per arm; set gate.min_trials to "
                f"{GATE_MIN_TRIALS_CAMPAIGN} or more, or matrix.exploratory: true for a DRAFT"
            )
        return self

    @model_validator(mode="after")
    def _check_shapes_only(self) -> Campaign:
        # Named shapes give prompts but no traffic: nothing builds a corpus or trains, so these would be ignored.
        if not isinstance(self.traffic, TrafficShapes):
            return self
        unused = [f"corpus.{name}" for name, value in self.corpus if value != getattr(CorpusSpec(), name)]
        if self.commands.train is not None:
            unused.insert(0, "commands.train")
        # The trainer's revision enters only the training input key (what makes a draft reusable).
        if self.source_revisions.trainer is not None:
            unused.append("source_revisions.trainer")
        if unused:
            raise ValueError(
                f"{', '.join(unused)} set, but traffic is named shapes ({', '.join(self.traffic.shapes)}): a shapes "
                "campaign builds no corpus and trains nothing, so nothing would read them; remove them, or give "
                "traffic.path (a traffic JSONL)"
            )
        return self

    @model_validator(mode="after")
    def _check_unused_trainer(self) -> Campaign:
        # With traffic but no cell serving `{training.output}`, the trainer-proxy records training as skipped:
        # a trainer and what only a training reads would be accepted and ignored (DESIGN.md, principle 1).
        # Shapes campaigns are _check_shapes_only's and _check_review's (same fields, their own reason).
        if self.shapes_only or not self.trains_nothing:
            return self
        why = f"no cell serves the draft this campaign trains (speculative model {TRAINED_DRAFT!r}), so nothing trains"
        problems = []
        train = self.commands.train
        if train is not None:
            # Named so the operator sees what goes with it; an explicit default (`kubernetes_job: null`) is not news.
            parts = sorted(name for name in train.model_fields_set - {"argv"}
                           if getattr(train, name) != TrainCommand.model_fields[name].default)
            given = f" (with {', '.join(parts)})" if parts else ""
            problems.append(f"commands.train{given} is set, but {why}: remove commands.train, or serve "
                            f"{TRAINED_DRAFT!r} in a cell")
        if self.source_revisions.trainer is not None:
            problems.append(f"source_revisions.trainer is set, but {why} and only a training reads it: remove it")
        if "training" in self.review.pre_approve:
            problems.append(f"review.pre_approve lists training, but {why} and there is no training plan to "
                            "pre-approve: remove training from review.pre_approve")
        if problems:
            raise ValueError("; ".join(problems))
        return self

    @property
    def publishes_externally(self) -> bool:
        """Whether publish.target sends the report off this machine (s3://, https://, http://)."""
        return self.publish.target.startswith(EXTERNAL_PUBLISH)

    @model_validator(mode="after")
    def _check_review(self) -> Campaign:
        steps = self.review.pre_approve
        plans = [step for step in steps if step in REVIEWED_STEPS]
        if plans and not self.acknowledgements.i_understand_this_mutates_cluster:
            raise ValueError(
                f"review.pre_approve {plans} runs those plans without a separate approval, which changes the cluster: "
                "it needs acknowledgements.i_understand_this_mutates_cluster: true; set the acknowledgement, or remove "
                "them from review.pre_approve (every plan then waits for `specdec approve RUN_ID "
                "--i-understand-this-mutates-cluster`)"
            )
        if "publish" in steps:
            # The policy is the review of an external publish; a folder needs none (the acknowledgement alone
            # writes it), so there it would change nothing.
            problems = []
            if not self.acknowledgements.i_understand_this_publishes_externally:
                problems.append(
                    "review.pre_approve lists publish, which sends the final report to publish.target without a "
                    "separate acknowledged call: it needs acknowledgements.i_understand_this_publishes_externally: "
                    "true; set the acknowledgement, or remove publish from review.pre_approve (the report then stays a "
                    "dry run until `specdec publish RUN_ID --i-understand-this-publishes-externally` publishes it)"
                )
            if not self.publishes_externally:
                problems.append(
                    f"review.pre_approve lists publish, but publish.target {self.publish.target!r} is a folder on this "
                    "machine, not external (s3://, https://, http://): the acknowledgement alone writes it and there "
                    "is no external publish to pre-approve; remove publish from review.pre_approve"
                )
            if problems:
                raise ValueError("; ".join(problems))
        # A shapes campaign trains nothing (training is recorded as skipped): there is no plan to pre-approve.
        if "training" in steps and self.shapes_only:
            raise ValueError(
                "review.pre_approve lists training, but traffic is named shapes: a shapes campaign trains nothing, so "
                "there is no training plan to pre-approve; remove training from review.pre_approve"
            )
        return self

    @model_validator(mode="after")
    def _check_kubernetes_templates(self) -> Campaign:
        # The Job and Pod templates are read only by the Kubernetes executors: on another scheduler they would be ignored.
        scheduler = self.capacity.scheduler
        if scheduler == "kubernetes":
            return self
        train = self.commands.train
        unused = [name for name, value in (("commands.train.kubernetes_job", train.kubernetes_job if train else None),
                                           ("commands.serve_pod_template", self.commands.serve_pod_template)) if value]
        if unused:
            raise ValueError(
                f"{' and '.join(unused)} set, but capacity.scheduler is {scheduler}: these Kubernetes manifest templates "
                f"are used only with capacity.scheduler: kubernetes; remove them or set the scheduler to kubernetes"
            )
        return self


def _get(data: Any, *path: str) -> Any:
    for key in path:
        if not isinstance(data, dict) or key not in data:
            return None
        data = data[key]
    return data


def _cells_train(matrix: Any) -> bool:
    """Whether a raw inline matrix has a cell serving the draft the campaign trains (`{training.output}`)."""
    cells = _get(matrix, "cells")
    if not isinstance(cells, list):
        return False
    return any(_get(cell, "serving", "speculative", "model") == TRAINED_DRAFT for cell in cells)


def missing_inputs(data: Any) -> list[str]:
    """Every required workflow input absent from a raw campaign mapping, in words."""
    if not isinstance(data, dict):
        return ["the campaign must be a YAML mapping"]
    missing: list[str] = []
    if not _get(data, "target", "checkpoint"):
        missing.append("target.checkpoint (path of the target checkpoint)")
    if "standing" not in data:
        missing.append("standing (the speculative config served today; write `standing: null` for none)")
    traffic = data.get("traffic")
    if not (_get(traffic, "path") or _get(traffic, "shapes")):
        missing.append("traffic (traffic.path: a traffic JSONL, or traffic.shapes: named workload shapes)")
    shapes_only = bool(_get(traffic, "shapes")) and not _get(traffic, "path")
    # Only a cell serving `{training.output}` makes the run train. A matrix given as a path is not read
    # here (no I/O in contracts): submit stores it inline and validates the campaign again, which asks then.
    if not shapes_only and _cells_train(data.get("matrix")) and not _get(data, "commands", "train", "argv"):
        missing.append("commands.train.argv (the operator's trainer; required when a cell serves the draft this "
                       "campaign trains, speculative model '{training.output}')")
    for name in ("serve", "bench", "eval"):
        value = _get(data, "commands", name)
        if value != "builtin" and not _get(value, "argv"):
            missing.append(f"commands.{name} (an argv template, or the explicit choice `builtin`)")
    matrix = data.get("matrix")
    if not (_get(matrix, "cells") or _get(matrix, "path")):
        missing.append("matrix (matrix.cells inline, or matrix.path)")
    if not _get(data, "capacity", "idle_check"):
        missing.append("capacity.idle_check (the operator's idle-node check argv; exit 0 means idle)")
    if not _get(data, "gate", "objective"):
        missing.append("gate.objective (the latency objective, e.g. tpot or tpot:p99)")
    if all(_get(data, "gate", floor) is None for floor in ("acceptance_floor", "acceptance_length_floor", "accuracy_floor")):
        missing.append("a floor: gate.acceptance_floor, gate.acceptance_length_floor or gate.accuracy_floor")
    return missing
