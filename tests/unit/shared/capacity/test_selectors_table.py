"""contracts/selectors.py is the one table of capacity.selectors keys: every key it
lists passes validation and changes exactly the consumers it names (the capacity
check's commands or decisions, the trainer's sbatch or Job, the bench's sbatch or
Pod); an unknown key or a malformed value is refused naming what to do; the docs
and the example campaign name every key."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, cast

import pytest
import yaml

from contracts import selectors as table
from contracts.campaign import Campaign, CapacitySpec, Matrix
from contracts.campaign.commands import Scheduler
from services.shared.capacity import kubernetes, slurm
from services.shared.capacity.check import check_node, validate
from services.shared.capacity.errors import CapacityConfigError
from tests.unit.shared.capacity.conftest import FIXTURES, RecordedRunner

ROOT = Path(__file__).resolve().parents[4]
RUN = "toy-20261130-010101-abcdef"
RUN_DIR = f"/bundles/{RUN}"
IDLE = [sys.executable, "-c", "pass", "{node}"]

# What the walk needs besides a key: a Kubernetes Job and Pod cannot be rendered without an image.
BASE: dict[str, dict[str, str]] = {"local": {}, "slurm": {}, "kubernetes": {table.IMAGE: "registry.example/base:1"}}
# A value per key that differs from the base (and, for the capacity check, from what the
# recorded cluster lets through unchanged: gpu08 is the only idle node and has 2 a100s).
VALUES: dict[tuple[str, str], str] = {
    ("slurm", table.PARTITION): "debug",
    ("slurm", table.NODELIST): "gpu[07-08]",
    ("slurm", table.GRES): "gpu:a100:4",
    ("kubernetes", table.LABEL_SELECTOR): "pool=gpu",
    ("kubernetes", table.TOLERATIONS): "nvidia.com/gpu",
    ("kubernetes", table.IMAGE): "registry.example/other:2",
    ("kubernetes", table.NAMESPACE): "ml",
    ("kubernetes", table.BUNDLE_PVC): "specdec-bundles",
    ("kubernetes", table.CPU): "8",
    ("kubernetes", table.MEMORY): "32Gi",
    ("kubernetes", table.GPU_RESOURCE): "amd.com/gpu",
}
ALL_KEYS = [(scheduler, name) for scheduler, keys in table.TABLES.items() for name in keys]


# --- what each consumer does with a campaign's selectors -----------------------------------


def capacity(scheduler: str, selectors: dict[str, str]) -> Any:
    """The commands the check runs and what it decides (node, per-node blockers and verdicts);
    what it only records (a node's GPU count) is left out."""
    read = lambda name: (FIXTURES / name).read_text()  # noqa: E731
    outputs = {
        tuple(slurm.sinfo_argv(selectors)): read("sinfo.txt"),
        tuple(slurm.squeue_argv(selectors)): read("squeue.txt"),
        tuple(kubernetes.nodes_argv(selectors)): read("kubectl-get-nodes.json"),
        tuple(kubernetes.pods_argv()): read("kubectl-get-pods-A.json"),
    }
    runner = RecordedRunner(outputs, idle_check=lambda argv: 0)
    spec = CapacitySpec(scheduler=scheduler, selectors=selectors, idle_check=IDLE)
    verdict = check_node(spec, None, run_id=RUN, runner=runner)
    return (runner.calls, verdict.node, [(n.name, n.blockers) for n in verdict.nodes],
            [(v.node, v.idle, v.reasons) for v in verdict.verdicts])


def trainer(scheduler: str, selectors: dict[str, str]) -> Any:
    """The trainer's launch: the sbatch argv, or the Job manifest."""
    from services.trainer_proxy.planning.builder import build_plan
    from tests.unit.trainer_proxy.helpers import campaign
    from tests.unit.trainer_proxy.planning.test_training_plan import INPUTS, PATHS

    camp = campaign(
        train_argv=["python", "train.py", "--out", "{output_dir}"], scheduler=scheduler, selectors=selectors
    )
    # The table's scheduler names are the campaign's (contracts/campaign/commands.py's Scheduler).
    launch = build_plan(camp, run_id=RUN, node="gpu08", scheduler=cast(Scheduler, scheduler), paths=PATHS,
                        inputs=INPUTS).launch
    return launch.model_dump(mode="json") if launch else None


def bench_campaign(scheduler: str, selectors: dict[str, str]) -> Campaign:
    data = yaml.safe_load((ROOT / "infra/examples/campaign.yaml").read_text())
    data["traffic"] = {"shapes": ["short"]}
    data["commands"].pop("train")
    data["source_revisions"].pop("trainer")  # refused with shapes: nothing is trained
    data["capacity"].update(scheduler=scheduler, selectors=selectors, idle_check=IDLE)
    # An accelerator cell, so the Pod asks for accelerators (gpu_resource).
    data["matrix"]["cells"] = [{"cell_id": "standing", "role": "standing", "hardware": "h100"},
                               {"cell_id": "ngram-k3", "role": "candidate", "hardware": "h100",
                                "serving": {"speculative": {"method": "ngram", "num_speculative_tokens": 3}}}]
    return Campaign.model_validate(data)


def bench(scheduler: str, selectors: dict[str, str]) -> Any:
    """Every launch's scheduler block: the sbatch argv and job script, or the Pod and kubectl argv."""
    from services.bench.planning.builder import build_plan

    camp = bench_campaign(scheduler, selectors)
    assert isinstance(camp.matrix, Matrix)
    plan = build_plan(camp, camp.matrix, run_id=RUN, default_node="gpu08", training_output=None,
                      prompts={"source": "shapes", "count": 4}, run_dir=RUN_DIR, cwd="/srv/specdec")
    return [launch.model_dump(mode="json", include={"slurm", "kubernetes"}) for launch in plan.launches]


OBSERVE = {"capacity": capacity, "trainer": trainer, "bench": bench}


# --- the walk ---------------------------------------------------------------------------------


def test_every_key_has_a_test_value_and_a_consumer():
    assert sorted(VALUES) == sorted(ALL_KEYS), "a key added to contracts/selectors.py needs a value here"
    for scheduler, name in ALL_KEYS:
        key = table.TABLES[scheduler][name]
        assert key.consumers and key.consumers <= set(table.CONSUMERS), f"{scheduler}.{name} names no consumer"
        assert key.pattern.fullmatch(key.example), f"{scheduler}.{name}: its own example {key.example!r} is refused"


@pytest.mark.parametrize(("scheduler", "name"), ALL_KEYS, ids=[f"{s}.{n}" for s, n in ALL_KEYS])
def test_each_key_changes_exactly_the_consumers_it_names(scheduler: str, name: str):
    base = BASE[scheduler]
    changed = {**base, name: VALUES[(scheduler, name)]}
    validate(CapacitySpec(scheduler=scheduler, selectors=changed, idle_check=IDLE))  # documented = accepted
    key = table.TABLES[scheduler][name]
    for consumer, observe in OBSERVE.items():
        moved = observe(scheduler, base) != observe(scheduler, changed)
        if consumer in key.consumers:
            assert moved, (
                f"capacity.selectors.{name} ({scheduler}) is listed as read by {consumer} but changes nothing there"
            )
        else:
            assert not moved, (
                f"capacity.selectors.{name} ({scheduler}) changes {consumer}, which the table does not list"
            )


def test_the_slurm_gres_reaches_both_batch_jobs_and_rules_out_nodes_without_it():
    selectors = {table.PARTITION: "gpu", table.GRES: "gpu:a100:2"}
    sbatch = trainer("slurm", selectors)["sbatch_argv"]
    assert sbatch[sbatch.index("--gres") + 1] == "gpu:a100:2"
    for launch in bench("slurm", selectors):
        argv = launch["slurm"]["sbatch_argv"]
        assert argv[argv.index("--gres") + 1] == "gpu:a100:2" and argv[argv.index("--partition") + 1] == "gpu"
    _, node, blockers, _ = capacity("slurm", selectors)
    assert node == "gpu08"
    lacking = dict(blockers)["gpu07"]
    assert lacking and "lacks generic resource gpu:a100:2" in lacking[-1] and "gpu:h100:8" in lacking[-1]


# --- refusals ---------------------------------------------------------------------------------


def test_an_unknown_key_is_refused_naming_the_allowed_ones():
    with pytest.raises(CapacityConfigError) as err:
        validate(CapacitySpec(scheduler="slurm", selectors={"gress": "gpu:1"}, idle_check=IDLE))
    message = str(err.value)
    assert "['gress']" in message and "allowed: partition, nodelist, gres" in message
    with pytest.raises(CapacityConfigError, match="allowed: none"):
        validate(CapacitySpec(scheduler="local", selectors={"partition": "x"}, idle_check=IDLE))


@pytest.mark.parametrize(
    ("scheduler", "selectors", "named"),
    [
        ("slurm", {"gres": "gpu:0"}, "capacity.selectors.gres = 'gpu:0' is not name[:type][:count]"),
        ("slurm", {"gres": "gpu 1"}, "capacity.selectors.gres"),
        ("slurm", {"partition": ""}, "capacity.selectors.partition"),
        ("kubernetes", {"memory": "lots"}, "capacity.selectors.memory = 'lots' is not a Kubernetes quantity"),
        ("kubernetes", {"namespace": "ML_Team"}, "capacity.selectors.namespace"),
        ("kubernetes", {"gpu_resource": "nvidia.com/"}, "capacity.selectors.gpu_resource"),
    ],
)
def test_a_malformed_value_is_refused_naming_the_key_and_the_form(scheduler, selectors, named):
    with pytest.raises(CapacityConfigError, match=named.replace("[", r"\[").replace("]", r"\]")):
        validate(CapacitySpec(scheduler=scheduler, selectors=selectors, idle_check=IDLE))


def test_the_planners_refuse_an_unknown_key_before_approval():
    from services.runtime.errors import ConfigurationError
    from services.trainer_proxy.errors import PlanError

    with pytest.raises(ConfigurationError, match="gress"):
        bench("slurm", {"gress": "gpu:1"})
    with pytest.raises(ConfigurationError, match="cpus"):
        bench("kubernetes", {**BASE["kubernetes"], "cpus": "8"})
    with pytest.raises(PlanError, match="gress"):
        trainer("slurm", {"gress": "gpu:1"})


@pytest.mark.parametrize(
    ("text", "items"),
    [
        ("gpu:1", [("gpu", None, 1)]),
        ("gpu", [("gpu", None, 1)]),
        ("gpu:a100:2,nvme:1", [("gpu", "a100", 2), ("nvme", None, 1)]),
        ("gpu:a100", [("gpu", "a100", 1)]),
    ],
)
def test_parse_gres(text, items):
    assert [(g.name, g.type, g.count) for g in table.parse_gres(text)] == items


# --- the docs name every key ------------------------------------------------------------------


def test_docs_and_the_example_campaign_name_every_key():
    docs = (ROOT / "docs/capacity.md").read_text()
    example = (ROOT / "infra/examples/campaign.yaml").read_text()
    for scheduler, name in ALL_KEYS:
        assert f"`{name}`" in docs, f"docs/capacity.md does not document {scheduler} selector {name}"
        assert f"{name}:" in example, f"infra/examples/campaign.yaml does not mention {scheduler} selector {name}"


def test_the_trainers_job_template_gets_the_tolerations_it_lacks_and_keeps_its_resources():
    from services.trainer_proxy.planning.kubernetes import apply_template

    template = {"apiVersion": "batch/v1", "kind": "Job", "spec": {"template": {"spec": {
        "tolerations": [{"key": "gpu", "operator": "Equal", "value": "yes"}],
        "containers": [{"name": "main", "image": "registry/op:2", "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}}}}
    selectors = {table.TOLERATIONS: "gpu,dedicated", table.CPU: "8", table.NAMESPACE: "ml"}
    job = apply_template(template, ["train"], run_id=RUN, node="n1", timeout_s=60, selectors=selectors)
    pod = job.manifest["spec"]["template"]["spec"]
    assert pod["tolerations"] == [{"key": "gpu", "operator": "Equal", "value": "yes"},
                                  {"key": "dedicated", "operator": "Exists"}]
    assert pod["containers"][0]["resources"] == {"limits": {"nvidia.com/gpu": "1"}}, "the template's own resources win"
    assert job.namespace == "ml", "a template without a namespace takes selectors.namespace"
