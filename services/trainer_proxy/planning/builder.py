"""The training plan's builder: `build_plan` turns the campaign, the node, the corpus splits, the
training input key and the reuse lookup (both computed by the caller, reuse.py) into a `TrainingPlan`
(model.py). Pure: staging.py reads the inputs and stores the plan; the same inputs give the same bytes
(no clock, no random names), so a redelivered trigger finds its plan unchanged.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from contracts import layout
from contracts.argv import ArgvError, ArgvTemplate
from contracts.artifacts.training import InputKey, ReusedDraft
from contracts.campaign import Campaign, Scheduler
from contracts.catalogue import TRAINER as SERVICE
from contracts.selectors import GRES, PARTITION, problems
from services.runtime.processes.procs import EXPERIMENT_ENV, SERVICE_ENV
from services.shared.scheduler import slurm
from services.trainer_proxy.errors import PlanError
from services.trainer_proxy.planning import kubernetes
from services.trainer_proxy.planning.model import (
    DETACHED_SERVICE,
    KubernetesLaunch,
    LocalLaunch,
    PlanInputs,
    ProbePlan,
    SlurmLaunch,
    TrainingPlan,
)
from services.trainer_proxy.planning.slurm_job import job_script

# After SIGTERM (or scancel), how long the trainer's group may take to exit before SIGKILL.
KILL_GRACE_S = 10.0
# The built-in probes load a draft and run one forward pass; past this they fail.
PROBE_TIMEOUT_S = 600.0
PROBE_PROMPTS = 4

BUILTIN_PROBES: dict[str, str] = {
    "checkpoint_loads": "the output directory holds a checkpoint that transformers' AutoConfig and "
    "AutoModelForCausalLM load on CPU; for a head in speculators' format (config.json with speculators_config, "
    "an EAGLE-3 head), its config names its algorithm and its safetensors weights load, all finite",
    "vocabulary_matches": "the draft's vocabulary size equals the target's, covers every token of the target's "
    "tokenizer, and (when the output carries a tokenizer) a sample of token IDs maps to the same strings; for a "
    "speculators head, its verifier vocabulary is the target's and a reduced draft vocabulary has its d2t mapping",
    "forward_pass": "a forward pass on tokenized heldout prompts yields finite logits whose last dimension is the "
    "target's vocabulary size; a speculators head's forward needs the target's hidden states, so head_fits_target "
    "replaces it (hidden size and auxiliary layers fit the target)",
}


@dataclass(frozen=True)
class PlanPaths:
    """Absolute paths the plan renders into argv (resolved by the caller from the bundle)."""

    run_dir: str
    cwd: str
    corpus: str
    corpus_train: str
    corpus_heldout: str

    @property
    def output_dir(self) -> str:
        return f"{self.run_dir}/{layout.TRAINING_OUTPUT_DIR}"

    def checkpoint_dir(self, subdir: str | None) -> str:
        """The draft checkpoint: the output directory, or the trainer's folder below it."""
        return self.output_dir if subdir is None else f"{self.output_dir}/{subdir}"

    def bundle_path(self, relpath: str) -> str:
        return f"{self.run_dir}/{relpath}"


def placeholder_values(campaign: Campaign, *, run_id: str, node: str, paths: PlanPaths) -> dict[str, str]:
    """Values of the whitelisted placeholders at the training step."""
    return {
        "run_id": run_id,
        "corpus": paths.corpus,
        "corpus_train": paths.corpus_train,
        "corpus_heldout": paths.corpus_heldout,
        "target": campaign.target.checkpoint,
        "tokenizer": campaign.target.tokenizer_dir,
        "output_dir": paths.output_dir,
        "node": node,
        "max_model_len": str(campaign.target.max_model_len),
    }


def _render(template: ArgvTemplate, values: dict[str, str], what: str) -> list[str]:
    try:
        return template.render(values)
    except ArgvError as exc:
        raise PlanError(f"{what}: {exc}") from None


def build_plan(
    campaign: Campaign, *, run_id: str, node: str, scheduler: Scheduler, paths: PlanPaths, inputs: PlanInputs,
    input_key: InputKey | None = None, reuse: ReusedDraft | None = None, reuse_note: str = "",
) -> TrainingPlan:
    """The plan for this campaign on `node`; PlanError when it cannot be built.

    `reuse` is the caller's lookup result for `input_key`, `reuse_note` why it
    found that (or nothing); with commands.train.reuse false both are ignored."""
    train = campaign.commands.train
    if train is None:
        raise PlanError("the campaign has no commands.train: set commands.train.argv to the operator's trainer")
    if scheduler != campaign.capacity.scheduler:
        raise PlanError(
            f"capacity selected node {node!r} on {scheduler}, but the campaign runs on "
            f"{campaign.capacity.scheduler}: re-run the capacity step (`specdec request capacity {run_id}`)"
        )
    values = placeholder_values(campaign, run_id=run_id, node=node, paths=paths)
    argv = _render(train.argv, values, "commands.train.argv")
    checkpoint = paths.checkpoint_dir(train.checkpoint_subdir)
    probe_values = {**values, "training.output": checkpoint}
    probe = _render(train.probe, probe_values, "commands.train.probe") if train.probe is not None else None
    if not train.reuse:
        reuse, reuse_note = None, ("off: commands.train.reuse is false, so no earlier draft is looked for; "
                                   "the trainer runs")
    elif reuse is not None and (input_key is None or reuse.key != input_key.key):
        raise PlanError(
            f"the draft of run {reuse.from_run} was found under another training input key than this plan's")
    common = {
        "run_id": run_id, "executor": scheduler, "node": node, "inputs": inputs, "target": campaign.target.checkpoint,
        "tokenizer": campaign.target.tokenizer_dir, "output_dir": paths.output_dir, "checkpoint_dir": checkpoint,
        "timeout_s": train.timeout_s, "kill_grace_s": KILL_GRACE_S, "input_key": input_key,
        "reuse_enabled": train.reuse, "reuse": reuse, "progress": train.progress,
        "reuse_note": reuse_note or "not looked up: no training input key was computed; the trainer runs",
    }
    if reuse is not None:
        return _reuse_plan(reuse, common, paths=paths, node=node, checkpoint=checkpoint)
    launch = _launch(campaign, scheduler, argv=argv, run_id=run_id, node=node, paths=paths, timeout_s=train.timeout_s)
    return TrainingPlan(
        **common,
        launch=launch,
        expected_outputs=[
            f"{checkpoint}: a draft checkpoint directory (config.json and weights) that transformers loads"
            + ("" if checkpoint == paths.output_dir else
               f" (commands.train.checkpoint_subdir {train.checkpoint_subdir!r} below {paths.output_dir})"),
            f"every file under {paths.output_dir} is hashed (sha256) into {layout.TRAINING_OUTPUTS}, partial or not",
            f"stdout and stderr at {layout.TRAINING_STDOUT} and {layout.TRAINING_STDERR} in the bundle",
        ],
        probes=ProbePlan(operator_argv=probe, builtin=dict(BUILTIN_PROBES), prompts=PROBE_PROMPTS,
                         timeout_s=PROBE_TIMEOUT_S),
        stop_conditions=[
            "the trainer exits with a non-zero status",
            "a non-finite loss (NaN or infinite, any spelling) appears anywhere in its stdout or stderr "
            "(JSON lines with a loss field, or loss=<float> text); the trainer is stopped at once",
            f"the trainer runs past {train.timeout_s:g} s: its whole process group (or job) is killed; "
            "partial outputs are kept and hashed",
            "a probe fails (the operator's probe exits non-zero, or a built-in probe fails)",
        ],
        preflight=f"right before launch, node {node} is checked again, read-only; if it is no longer idle, "
        "nothing starts and training fails with the reasons",
        deployment_changes=_changes(launch, node, run_id),
        cleanup=_cleanup(launch, run_id),
    )


def _reuse_plan(
    reuse: ReusedDraft, common: dict[str, Any], *, paths: PlanPaths, node: str, checkpoint: str
) -> TrainingPlan:
    """Nothing starts: the earlier run's draft is copied into this run's output directory."""
    source = f"run {reuse.from_run}"
    return TrainingPlan(
        **common,
        launch=None,
        expected_outputs=[
            f"{paths.output_dir}: a copy of the draft of {source} ({reuse.checkpoint_dir}), {reuse.files} file(s), "
            f"{reuse.total_bytes} bytes, each with the sha256 its outputs.json ({reuse.manifest.sha256}) records",
            *([f"{checkpoint}: the draft checkpoint in the copy (same input key, so the same folder as in {source})"]
              if checkpoint != paths.output_dir else []),
            f"{layout.TRAINING_OUTPUTS} naming {source} (reused_from) and {layout.TRAINING_REUSE} with the copy's time",
        ],
        probes=None,
        stop_conditions=[
            f"a file of the draft of {source} is missing or no longer has its recorded sha256 when it is copied: "
            "training fails with ReuseFailed and nothing is trained",
        ],
        preflight=f"none: nothing is started, so node {node} is not checked again",
        deployment_changes=[
            "none: no process, batch job or Job is started; the draft's files are copied inside the bundle root",
            "the standing workload and configuration are never changed; nothing is preempted",
        ],
        cleanup=["nothing to clean up: nothing is started; the copy stays in this run's bundle, hashed"],
    )


def _launch(
    campaign: Campaign, scheduler: Scheduler, *, argv: list[str], run_id: str, node: str, paths: PlanPaths,
    timeout_s: float,
) -> LocalLaunch | SlurmLaunch | KubernetesLaunch:
    # The keys this launch reads (contracts/selectors.py); refused before approval when
    # unknown or malformed, also when the capacity step did not run for this training.
    found = problems(scheduler, campaign.capacity.selectors)
    if found:
        raise PlanError("; ".join(found))
    declared = list(campaign.commands.train.env) if campaign.commands.train else []
    if scheduler == "local":
        return LocalLaunch(
            argv=argv,
            cwd=paths.cwd,
            env_added={EXPERIMENT_ENV: run_id, SERVICE_ENV: DETACHED_SERVICE},
            stdout_path=layout.TRAINING_STDOUT,
            stderr_path=layout.TRAINING_STDERR,
            env=declared,
        )
    if scheduler == "slurm":
        script = job_script(argv, run_id=run_id, service=SERVICE)
        return SlurmLaunch(
            argv=argv,
            cwd=paths.cwd,
            job_name=slurm.job_name(run_id),
            comment=slurm.comment(run_id),
            job_script=script,
            job_script_path=layout.TRAINING_SLURM_JOB,
            sbatch_argv=slurm.sbatch_argv(
                run_id=run_id,
                node=node,
                partition=campaign.capacity.selectors.get(PARTITION),
                # The trainer runs on the node capacity selected for its GRES, and needs them too.
                gres=campaign.capacity.selectors.get(GRES),
                cwd=paths.cwd,
                stdout=paths.bundle_path(layout.TRAINING_STDOUT),
                stderr=paths.bundle_path(layout.TRAINING_STDERR),
                script=[paths.bundle_path(layout.TRAINING_SLURM_JOB)],
                # --time backs up specdec's own timeout and the kill grace (whole minutes, rounded up).
                time_minutes=max(1, math.ceil((timeout_s + KILL_GRACE_S) / 60)) + 1,
            ),
            status_argv=slurm.status_argv("{job_id}"),
            cancel_argv=slurm.cancel_argv("{job_id}"),
            stdout_path=layout.TRAINING_STDOUT,
            stderr_path=layout.TRAINING_STDERR,
            env=declared,
        )
    try:
        train = campaign.commands.train
        template = kubernetes.load_template(train.kubernetes_job) if train and train.kubernetes_job else None
        job = kubernetes.render_job(
            argv, run_id=run_id, node=node, selectors=campaign.capacity.selectors,
            cwd=paths.cwd, bundle_run_dir=paths.run_dir, timeout_s=timeout_s, template=template,
        )
    except kubernetes.KubernetesPlanError as exc:
        raise PlanError(str(exc)) from None
    return KubernetesLaunch(
        argv=argv,
        namespace=job.namespace,
        job_name=job.name,
        manifest=job.manifest,
        manifest_path=layout.TRAINING_K8S_JOB,
        apply_argv=["kubectl", "apply", "-n", job.namespace, "-f", paths.bundle_path(layout.TRAINING_K8S_JOB)],
        note=kubernetes.PLAN_ONLY_NOTE.format(run_id=run_id, manifest=paths.bundle_path(layout.TRAINING_K8S_JOB)),
    )


def _changes(launch: LocalLaunch | SlurmLaunch | KubernetesLaunch, node: str, run_id: str) -> list[str]:
    keep = "the standing workload and configuration are never changed; nothing is preempted"
    if isinstance(launch, LocalLaunch):
        return [f"start one process on {node} (argv above) in its own process group, labelled "
                f"{EXPERIMENT_ENV}={run_id}; it dies with the trainer-proxy", keep]
    if isinstance(launch, SlurmLaunch):
        return [f"submit one batch job {launch.job_name} (comment {launch.comment}) pinned to node {node}", keep]
    return [f"(not applied by specdec) one Job {launch.job_name} in namespace {launch.namespace} labelled "
            f"experiment={run_id}, pinned to node {node}", keep]


def _cleanup(launch: LocalLaunch | SlurmLaunch | KubernetesLaunch, run_id: str) -> list[str]:
    order = "only after stdout, stderr and every output file are captured and hashed"
    never = "outputs and volumes are never deleted: partial outputs stay in the bundle, hashed"
    if isinstance(launch, LocalLaunch):
        return [f"{order}: kill the process group of any process still labelled {EXPERIMENT_ENV}={run_id} "
                f"{SERVICE_ENV}={DETACHED_SERVICE} or {SERVICE} (selected by that label only)", never]
    if isinstance(launch, SlurmLaunch):
        return [f"{order}: scancel any job still named {launch.job_name} whose comment is {launch.comment} "
                "(selected by that label only)", never]
    return [f"{order}: kubectl delete job -n {launch.namespace} -l experiment={run_id} "
            "(selected by that label only; the operator runs it for a plan-only Job)", never]
