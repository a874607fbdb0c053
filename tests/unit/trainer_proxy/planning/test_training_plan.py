"""The training plan: exact argv, deterministic bytes, Slurm and Kubernetes renderings,
and refusals (acknowledgement tokens, placeholders with no value at this step)."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys

import pytest
import yaml
from pydantic import ValidationError

from contracts import layout
from contracts.campaign import Campaign, TrainCommand
from contracts.campaign.commands import Scheduler
from contracts.envelope import ArtifactRef
from services.runtime.bundle.bundle_records import canonical_json
from services.trainer_proxy.errors import PlanError
from services.trainer_proxy.planning import kubernetes
from services.trainer_proxy.planning.builder import PlanPaths, build_plan
from services.trainer_proxy.planning.model import KubernetesLaunch, LocalLaunch, PlanInputs, SlurmLaunch, TrainingPlan
from services.trainer_proxy.planning.slurm_job import job_script
from tests.unit.trainer_proxy.helpers import EXAMPLE, campaign

RUN = "toy-20261130-010101-abcdef"
SHA = "a" * 64
PATHS = PlanPaths(
    run_dir="/bundles/" + RUN,
    cwd="/srv/specdec",
    corpus=f"/bundles/{RUN}/corpus/CORPUS.jsonl",
    corpus_train=f"/bundles/{RUN}/training/corpus-train.jsonl",
    corpus_heldout=f"/bundles/{RUN}/training/corpus-heldout.jsonl",
)


def _ref(path: str) -> ArtifactRef:
    return ArtifactRef(uri=f"bundle://{RUN}/{path}", sha256=SHA, size_bytes=10)


INPUTS = PlanInputs(
    corpus=_ref("corpus/CORPUS.jsonl"), corpus_train=_ref("training/corpus-train.jsonl"),
    corpus_heldout=_ref("training/corpus-heldout.jsonl"), train_records=6, heldout_records=2, rejected_lines=0,
)
ARGV = ["python", "train.py", "--corpus", "{corpus_train}", "--target", "{target}", "--out", "{output_dir}",
        "--tag", "{run_id}@{node}", "--literal", "a;b $(rm -rf x) {{braces}}"]


def _plan(camp: Campaign, scheduler: Scheduler = "local", node: str = "node-1"):
    return build_plan(camp, run_id=RUN, node=node, scheduler=scheduler, paths=PATHS, inputs=INPUTS)


def test_local_plan_renders_the_exact_argv_and_labels():
    plan = _plan(campaign(train_argv=ARGV, target="models/t", timeout_s=90))
    assert isinstance(plan.launch, LocalLaunch)
    assert plan.launch.argv == [
        "python", "train.py", "--corpus", PATHS.corpus_train, "--target", "models/t", "--out",
        f"{PATHS.run_dir}/training/output", "--tag", f"{RUN}@node-1", "--literal", "a;b $(rm -rf x) {braces}",
    ]
    assert plan.launch.env_added == {"SPECDEC_EXPERIMENT": RUN, "SPECDEC_SERVICE": "trainer"}
    assert plan.launch.cwd == "/srv/specdec" and plan.timeout_s == 90 and plan.node == "node-1"
    assert plan.output_dir == f"{PATHS.run_dir}/training/output"
    assert plan.inputs == INPUTS
    assert any("label" in line for line in plan.cleanup) and any("never deleted" in line for line in plan.cleanup)


def test_the_plan_is_deterministic_and_every_train_field_changes_its_hash(tmp_path):
    base = campaign(train_argv=ARGV)
    k8s = campaign(train_argv=ARGV, scheduler="kubernetes", selectors={"image": "registry/trainer:1"})
    template = tmp_path / "job.yaml"
    template.write_text("apiVersion: batch/v1\nkind: Job\nspec:\n  template:\n    spec:\n"
                        "      containers: [{name: main, image: registry/operator:2}]\n")
    with_template = k8s.model_dump(by_alias=True)
    with_template["commands"]["train"]["kubernetes_job"] = str(template)
    first, second = canonical_json(_plan(base)), canonical_json(_plan(base))
    assert first == second
    variants = {
        "argv": _plan(campaign(train_argv=[*ARGV, "--extra"])),
        "timeout_s": _plan(campaign(train_argv=ARGV, timeout_s=5)),
        "probe": _plan(campaign(train_argv=ARGV, probe=["python", "probe.py", "{training.output}"])),
        # Consumed with scheduler kubernetes: compared with the same campaign without a template.
        "kubernetes_job": _plan(Campaign.model_validate(with_template), scheduler="kubernetes"),
        # Off: the plan says no earlier draft is looked for, whatever the lookup found.
        "reuse": _plan(campaign(train_argv=ARGV, reuse=False)),
        "checkpoint_subdir": _plan(campaign(train_argv=ARGV, checkpoint_subdir="9")),
        "env": _plan(campaign(train_argv=ARGV, env=["HF_TOKEN"])),
        # Read by the relay from the approved plan (execution/execute.py _reporter).
        "progress": _plan(campaign(train_argv=ARGV, progress={"format": "json"})),
    }
    assert set(variants) == set(TrainCommand.model_fields), (
        "a new commands.train field needs a consumer and a case here")
    others = [_plan(base, node="node-2"), _plan(campaign(train_argv=ARGV, target="models/other")),
              _plan(k8s, scheduler="kubernetes")]
    hashes = {hashlib.sha256(canonical_json(p)).hexdigest() for p in [*variants.values(), *others]}
    assert hashlib.sha256(first).hexdigest() not in hashes and len(hashes) == len(variants) + len(others)


def test_the_probe_argv_is_rendered_with_the_output_directory():
    plan = _plan(campaign(train_argv=ARGV, probe=["python", "probe.py", "{training.output}", "{output_dir}"]))
    assert plan.probes.operator_argv == ["python", "probe.py", plan.output_dir, plan.output_dir]
    assert set(plan.probes.builtin) == {"checkpoint_loads", "vocabulary_matches", "forward_pass"}


def test_a_checkpoint_subdir_names_the_folder_probed_and_served_below_the_output_dir():
    plan = _plan(campaign(train_argv=ARGV, probe=["python", "probe.py", "{training.output}", "{output_dir}"],
                          checkpoint_subdir="ckpt/9"))
    assert plan.output_dir == f"{PATHS.run_dir}/training/output"
    assert plan.checkpoint_dir == f"{plan.output_dir}/ckpt/9" and plan.checkpoint_subdir == "ckpt/9"
    # the trainer still gets {output_dir}
    assert plan.launch.argv[plan.launch.argv.index("--out") + 1] == plan.output_dir
    assert plan.probes.operator_argv == ["python", "probe.py", plan.checkpoint_dir, plan.output_dir]
    assert plan.expected_outputs[0].startswith(f"{plan.checkpoint_dir}: a draft checkpoint directory")
    unset = _plan(campaign(train_argv=ARGV))
    assert unset.checkpoint_dir == unset.output_dir and unset.checkpoint_subdir is None


def test_a_plan_stored_before_checkpoint_dir_existed_still_reads_with_its_checkpoint_in_the_output_dir():
    stored = json.loads(canonical_json(_plan(campaign(train_argv=ARGV))))
    del stored["checkpoint_dir"]  # the shape of a plan written before commands.train.checkpoint_subdir
    older = TrainingPlan.model_validate(stored)
    assert older.checkpoint_dir == older.output_dir and older.checkpoint_subdir is None
    with pytest.raises(ValidationError, match="output_dir"):
        TrainingPlan.model_validate({k: v for k, v in stored.items() if k != "output_dir"})


def test_a_placeholder_with_no_value_at_training_is_a_plan_error():
    with pytest.raises(PlanError, match=r"\{port\} has no value"):
        _plan(campaign(train_argv=["python", "train.py", "--port", "{port}"]))


def test_a_scheduler_other_than_the_campaigns_is_refused():
    with pytest.raises(PlanError, match="re-run the capacity step"):
        _plan(campaign(train_argv=ARGV), scheduler="slurm")


@pytest.mark.parametrize("token", ["--i-understand-this-mutates-cluster", "I_UNDERSTAND", "i understand"])
def test_an_acknowledgement_token_in_the_trainer_argv_is_refused(token):
    data = yaml.safe_load(EXAMPLE.read_text())
    data["commands"]["train"]["argv"] = ["python", "train.py", token]
    with pytest.raises(ValidationError, match="looks like an acknowledgement"):
        Campaign.model_validate(data)
    data["commands"]["train"]["argv"] = ["python", "train.py"]
    data["commands"]["train"]["probe"] = ["python", "probe.py", token]
    with pytest.raises(ValidationError, match="looks like an acknowledgement"):
        Campaign.model_validate(data)


def test_slurm_plan_labels_the_job_and_pins_the_node():
    camp = campaign(train_argv=ARGV, scheduler="slurm", selectors={"partition": "gpu"}, timeout_s=150)
    plan = _plan(camp, scheduler="slurm")
    launch = plan.launch
    assert isinstance(launch, SlurmLaunch)
    argv = launch.sbatch_argv
    assert argv[0] == "sbatch"
    assert argv[argv.index("--job-name") + 1] == f"specdec-{RUN}"
    assert argv[argv.index("--comment") + 1] == f"experiment={RUN}"
    assert argv[argv.index("--nodelist") + 1] == "node-1"
    assert argv[argv.index("--partition") + 1] == "gpu"
    assert argv[argv.index("--output") + 1] == f"{PATHS.run_dir}/training/stdout.log"
    assert argv[argv.index("--chdir") + 1] == "/srv/specdec"
    assert argv[argv.index("--time") + 1] == "4"  # (150 s + 10 s grace) -> 3 min, + 1
    assert "--wrap" not in argv and argv[-1] == f"{PATHS.run_dir}/{layout.TRAINING_SLURM_JOB}"
    assert "scancel" in " ".join(plan.cleanup) and f"experiment={RUN}" in " ".join(plan.cleanup)


def test_the_slurm_job_script_execs_the_argv_without_a_shell(tmp_path):
    probe = [sys.executable, "-c", "import json, sys; print(json.dumps(sys.argv[1:]))", "a;b", "$(touch pwned)", "`x`",
             "é"]
    script = tmp_path / "job.py"
    script.write_text(job_script(probe, run_id=RUN, service="trainer-proxy"))
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, cwd=tmp_path, check=True)
    assert json.loads(out.stdout) == ["a;b", "$(touch pwned)", "`x`", "é"]
    assert not (tmp_path / "pwned").exists()


def test_kubernetes_plan_is_a_labelled_job_and_says_it_is_plan_only():
    camp = campaign(train_argv=ARGV, scheduler="kubernetes",
                    selectors={"image": "registry/trainer:1", "namespace": "ml"})
    plan = _plan(camp, scheduler="kubernetes")
    launch = plan.launch
    assert isinstance(launch, KubernetesLaunch) and launch.plan_only is True
    manifest = launch.manifest
    assert manifest["kind"] == "Job" and manifest["metadata"]["labels"]["experiment"] == RUN
    assert manifest["metadata"]["namespace"] == "ml"
    pod = manifest["spec"]["template"]
    assert pod["metadata"]["labels"]["experiment"] == RUN
    container = pod["spec"]["containers"][0]
    assert container["command"] == plan.launch.argv and "args" not in container
    assert pod["spec"]["nodeSelector"] == {"kubernetes.io/hostname": "node-1"}
    assert manifest["spec"]["backoffLimit"] == 0 and "ttlSecondsAfterFinished" not in manifest["spec"]
    assert "does not apply it" in launch.note and "-l experiment=" + RUN in " ".join(plan.cleanup)


def test_kubernetes_needs_an_image_and_names_stay_short():
    with pytest.raises(PlanError, match="selectors.image"):
        _plan(campaign(train_argv=ARGV, scheduler="kubernetes"), scheduler="kubernetes")
    long_run = "r" + "x" * 61 + "z"
    name = kubernetes.job_name(long_run)
    assert len(name) <= 63 and name != kubernetes.job_name(long_run[:-1] + "y")


def test_kubernetes_plan_applies_the_operators_job_template(tmp_path):
    template = tmp_path / "job.yaml"
    template.write_text(
        "apiVersion: batch/v1\nkind: Job\nmetadata:\n  generateName: trainer-\n  namespace: research\n"
        "  labels: {team: ml}\nspec:\n  backoffLimit: 6\n  ttlSecondsAfterFinished: 60\n  template:\n"
        "    spec:\n      serviceAccountName: trainer\n      containers:\n      - name: main\n"
        "        image: registry/operator-trainer:7\n        args: [ignored]\n"
        "        resources: {limits: {nvidia.com/gpu: 1}}\n        env: [{name: HF_HOME, value: /cache}]\n"
    )
    camp = campaign(train_argv=ARGV, scheduler="kubernetes")
    data = camp.model_dump(by_alias=True)
    data["commands"]["train"]["kubernetes_job"] = str(template)
    plan = _plan(Campaign.model_validate(data), scheduler="kubernetes")
    manifest = plan.launch.manifest
    pod = manifest["spec"]["template"]
    container = pod["spec"]["containers"][0]
    # The operator's choices stay ...
    assert container["image"] == "registry/operator-trainer:7"
    assert container["resources"]["limits"]["nvidia.com/gpu"] == 1
    assert pod["spec"]["serviceAccountName"] == "trainer" and manifest["metadata"]["labels"]["team"] == "ml"
    assert manifest["metadata"]["namespace"] == "research"
    assert {"name": "HF_HOME", "value": "/cache"} in container["env"]
    # ... and what specdec guarantees is set on top.
    assert manifest["metadata"]["name"] == kubernetes.job_name(RUN) and "generateName" not in manifest["metadata"]
    assert manifest["metadata"]["labels"]["experiment"] == RUN and pod["metadata"]["labels"]["experiment"] == RUN
    assert container["command"] == plan.launch.argv and "args" not in container
    assert {"name": "SPECDEC_EXPERIMENT", "value": RUN} in container["env"]
    assert pod["spec"]["nodeSelector"]["kubernetes.io/hostname"] == "node-1"
    assert manifest["spec"]["backoffLimit"] == 0 and "ttlSecondsAfterFinished" not in manifest["spec"]


def test_a_template_that_is_not_a_job_is_refused(tmp_path):
    template = tmp_path / "pod.yaml"
    template.write_text("apiVersion: v1\nkind: Pod\nspec: {containers: [{name: x, image: y}]}\n")
    data = campaign(train_argv=ARGV, scheduler="kubernetes").model_dump(by_alias=True)
    data["commands"]["train"]["kubernetes_job"] = str(template)
    with pytest.raises(PlanError, match="must be a Kubernetes Job"):
        _plan(Campaign.model_validate(data), scheduler="kubernetes")
