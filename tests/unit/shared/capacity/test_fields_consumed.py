"""No inert configuration (docs/design.md#principle-1-no-inert-configuration): each field of
`campaign.capacity` changes what the capacity check runs."""

from __future__ import annotations

from contracts.campaign import CapacitySpec
from services.shared.capacity import kubernetes, slurm
from services.shared.capacity.check import check_node


def commands_run(spec: CapacitySpec, recorded, fixture_text) -> list[object]:
    outputs = {
        tuple(slurm.sinfo_argv(spec.selectors)): fixture_text("sinfo.txt"),
        tuple(slurm.squeue_argv(spec.selectors)): fixture_text("squeue.txt"),
        tuple(kubernetes.nodes_argv(spec.selectors)): fixture_text("kubectl-get-nodes.json"),
        tuple(kubernetes.pods_argv()): fixture_text("kubectl-get-pods-A.json"),
    }
    runner = recorded(outputs, idle_check=lambda argv: 0)
    check_node(spec, None, run_id="run-1", runner=runner)
    # What ran, and which declared variables the idle check was given (the platform's are the same each time).
    return [*runner.calls, sorted(name for env in runner.envs if env for name in env if name == "IDLE_CHECK_TOKEN")]


def test_scheduler_selectors_and_idle_check_each_change_what_runs(recorded, fixture_text, monkeypatch):
    monkeypatch.setenv("IDLE_CHECK_TOKEN", "token-value")
    base = CapacitySpec(scheduler="slurm", selectors={}, idle_check=["check-a", "{node}"])
    baseline = commands_run(base, recorded, fixture_text)
    variants = {
        "scheduler": base.model_copy(update={"scheduler": "kubernetes"}),
        "selectors": base.model_copy(update={"selectors": {"partition": "gpu"}}),
        "idle_check": CapacitySpec(scheduler="slurm", selectors={}, idle_check=["check-b", "{node}"]),
        "idle_check_env": base.model_copy(update={"idle_check_env": ["IDLE_CHECK_TOKEN"]}),
    }
    assert set(variants) == set(CapacitySpec.model_fields), "a new CapacitySpec field needs a consumer and a case here"
    for field, spec in variants.items():
        assert commands_run(spec, recorded, fixture_text) != baseline, f"capacity.{field} changed nothing"


def test_kubernetes_tolerations_change_the_decision(recorded, fixture_text):
    def selected(selectors: dict[str, str]) -> str | None:
        outputs = {
            tuple(kubernetes.nodes_argv(selectors)): fixture_text("kubectl-get-nodes.json"),
            tuple(kubernetes.pods_argv()): fixture_text("kubectl-get-pods-A.json"),
        }
        # Only gpu-e passes the idle check: it is selectable only when its taint is tolerated.
        runner = recorded(outputs, idle_check=lambda argv: 0 if argv[1] == "gpu-e" else 1)
        spec = CapacitySpec(scheduler="kubernetes", selectors=selectors, idle_check=["check", "{node}"])
        return check_node(spec, None, run_id="run-1", runner=runner).node

    assert selected({}) is None
    assert selected({"tolerations": "nvidia.com/gpu"}) == "gpu-e"


def test_the_trainer_jobs_placement_keys_pass_the_kubernetes_check():
    """A Kubernetes campaign names the Job's image, namespace and bundle volume in
    capacity.selectors; the node check must accept them (the trainer-proxy reads them)."""
    from contracts.argv import ArgvTemplate
    from contracts.campaign import CapacitySpec
    from services.shared.capacity.check import validate

    validate(CapacitySpec(scheduler="kubernetes", idle_check=ArgvTemplate(["true"]),
                          selectors={"image": "specdec:1", "namespace": "ml", "bundle_pvc": "bundles"}))
