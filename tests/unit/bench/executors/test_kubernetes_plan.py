"""The Kubernetes serving plan (pure rendering): one labelled Pod per launch, the
kubectl argv that applies, reaches and deletes it, cleanup by label, and the
refusal to run without kubectl."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from contracts.campaign import Campaign, Matrix
from services.bench.executors import kubernetes, kubernetes_pod
from services.bench.planning.builder import build_plan
from services.runtime.errors import ConfigurationError, StepFailed

ROOT = Path(__file__).resolve().parents[4]
RUN = "toy-20261130-020202-abcdef"
RUN_DIR = f"/bundles/{RUN}"
SELECTORS = {"image": "registry.example/vllm:0.11", "namespace": "bench", "cpu": "8", "memory": "32Gi"}


def plan_of(scheduler: str = "kubernetes", selectors: dict[str, str] | None = None, hardware: str = "h100",
            template: Path | None = None):
    data = yaml.safe_load((ROOT / "infra/examples/campaign.yaml").read_text())
    data["commands"]["serve_pod_template"] = None if template is None else str(template)
    data["traffic"] = {"shapes": ["short"]}
    data["commands"].pop("train")
    data["source_revisions"].pop("trainer")  # refused with shapes: nothing is trained
    data["capacity"].update(scheduler=scheduler, selectors=SELECTORS if selectors is None else selectors)
    data["matrix"]["cells"] = [
        {"cell_id": "standing", "role": "standing", "hardware": hardware, "serving": {"tensor_parallel_size": 2}},
        {"cell_id": "ngram-k3", "role": "candidate", "hardware": hardware, "regime": "cold", "trials": 3,
         "serving": {"tensor_parallel_size": 2, "speculative": {"method": "ngram", "num_speculative_tokens": 3}}},
    ]
    camp = Campaign.model_validate(data)
    assert isinstance(camp.matrix, Matrix)
    return build_plan(camp, camp.matrix, run_id=RUN, default_node="gpu-7", training_output=None,
                      prompts={"source": "shapes", "count": 4}, run_dir=RUN_DIR, cwd="/srv/specdec")


def test_each_launch_renders_a_labelled_pod_pinned_to_the_node() -> None:
    plan = plan_of()
    assert plan.executor == "kubernetes" and len(plan.launches) == 4
    pod = plan.launches[2].kubernetes
    assert pod is not None and plan.launches[2].slurm is None
    manifest = pod.manifest
    assert manifest["kind"] == "Pod" and manifest["metadata"]["namespace"] == "bench"
    assert manifest["metadata"]["labels"] == {
        "experiment": RUN, "app.kubernetes.io/managed-by": "specdec", "specdec.io/step": "bench"}
    assert manifest["metadata"]["annotations"] == {"specdec.io/cell": "ngram-k3", "specdec.io/launch": "2"}
    spec = manifest["spec"]
    assert spec["restartPolicy"] == "Never"
    assert spec["nodeSelector"] == {"kubernetes.io/hostname": "gpu-7"}
    (container,) = spec["containers"]
    cell = plan.cells[1]
    # Exec form, the cell's argv with the Pod's own fixed port; no shell anywhere.
    assert container["command"] == [t.replace("{port}", str(kubernetes_pod.SERVE_PORT)) for t in cell.serve_argv]
    assert container["command"][container["command"].index("--host") + 1] == "0.0.0.0"
    assert container["image"] == SELECTORS["image"]
    assert {"name": "SPECDEC_EXPERIMENT", "value": RUN} in container["env"]
    assert container["resources"] == {"requests": {"cpu": "8", "memory": "32Gi"},
                                      "limits": {"cpu": "8", "memory": "32Gi", "nvidia.com/gpu": "2"}}
    assert container["readinessProbe"]["httpGet"] == {"path": "/health", "port": kubernetes_pod.SERVE_PORT}
    assert container["volumeMounts"] == [{"name": "bundle", "mountPath": RUN_DIR}]
    assert spec["volumes"][0]["hostPath"]["path"] == RUN_DIR


def test_the_plan_shows_every_kubectl_argv_and_the_label_selected_cleanup() -> None:
    plan = plan_of()
    names = [launch.kubernetes.pod_name for launch in plan.launches]
    assert len(set(names)) == len(names)
    pod = plan.launches[1].kubernetes
    assert pod.manifest_path == "bench/ngram-k3/launch-1/pod.json"
    assert pod.apply_argv == ["kubectl", "apply", "-n", "bench", "-f", f"{RUN_DIR}/bench/ngram-k3/launch-1/pod.json"]
    assert pod.wait_argv == ["kubectl", "wait", "-n", "bench", "--for=condition=Ready", f"pod/{pod.pod_name}",
                             "--timeout=300s"]
    assert pod.delete_argv[:5] == ["kubectl", "delete", "pod", "-n", "bench"] and pod.pod_name in pod.delete_argv
    selector = f"experiment={RUN},app.kubernetes.io/managed-by=specdec,specdec.io/step=bench"
    assert pod.cleanup_argv == ["kubectl", "delete", "pods", "-n", "bench", "-l", selector, "--ignore-not-found"]
    assert any(selector in line for line in plan.cleanup)


def test_cpu_cells_ask_for_no_accelerator_and_a_claim_replaces_the_host_path() -> None:
    plan = plan_of(selectors={"image": "img", "bundle_pvc": "bundles"}, hardware="cpu")
    manifest = plan.launches[0].kubernetes.manifest
    assert "resources" not in manifest["spec"]["containers"][0]
    assert manifest["metadata"]["namespace"] == "default"
    assert manifest["spec"]["volumes"] == [{"name": "bundle", "persistentVolumeClaim": {"claimName": "bundles"}}]


def test_the_plan_needs_the_serving_image() -> None:
    with pytest.raises(ConfigurationError, match="capacity.selectors.image"):
        plan_of(selectors={})


def test_pod_names_stay_valid_for_long_run_ids() -> None:
    long_run = "a" + "b" * 61 + "c"
    names = {kubernetes_pod.pod_name(long_run, index) for index in range(12)}
    assert len(names) == 12 and all(len(name) <= 63 and not name.endswith("-") for name in names)


def test_scheduler_changes_the_plan() -> None:
    on_k8s, local = plan_of(), plan_of("local")
    assert all(launch.kubernetes is None for launch in local.launches)
    assert all(launch.kubernetes is not None for launch in on_k8s.launches)
    assert on_k8s.deployment_changes != local.deployment_changes and on_k8s.cleanup != local.cleanup


def test_no_kubectl_on_path_fails_before_any_launch(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(StepFailed, match="kubectl is not on the bench-runner's PATH") as caught:
        kubernetes.require_kubectl()
    assert caught.value.error_type == "KubectlMissing"
    # With a kubectl on PATH the check passes (what it can reach is kubectl's business).
    fake = tmp_path / "kubectl"
    fake.write_text(f"#!{sys.executable}\n")
    fake.chmod(0o755)
    kubernetes.require_kubectl()


TEMPLATE: dict[str, Any] = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {"name": "operator-name", "namespace": "serving", "labels": {"team": "inference"}},
    "spec": {
        "serviceAccountName": "bench",
        "tolerations": [{"key": "gpu", "operator": "Exists"}],
        "nodeSelector": {"pool": "h100"},
        "containers": [{
            "name": "vllm", "image": "registry.example/vllm:ops", "args": ["--ignored"],
            "env": [{"name": "HF_HOME", "value": "/cache"}, {"name": "SPECDEC_EXPERIMENT", "value": "forged"}],
            "resources": {"limits": {"nvidia.com/gpu": "4"}},
            "volumeMounts": [{"name": "cache", "mountPath": "/cache"}],
        }],
        "volumes": [{"name": "cache", "emptyDir": {}}],
    },
}


def test_the_operators_pod_template_keeps_its_own_and_gets_the_label_argv_and_node(tmp_path: Path) -> None:
    path = tmp_path / "pod.yaml"
    path.write_text(yaml.safe_dump(TEMPLATE))
    plan = plan_of(selectors={"namespace": "bench"}, template=path)
    pod = plan.launches[1].kubernetes
    manifest = pod.manifest
    meta = manifest["metadata"]
    assert meta["name"] == pod.pod_name != "operator-name"
    assert meta["namespace"] == "serving" and pod.apply_argv[3] == "serving"
    assert meta["labels"] == {"team": "inference", "experiment": RUN, "app.kubernetes.io/managed-by": "specdec",
                              "specdec.io/step": "bench"}
    spec = manifest["spec"]
    assert spec["serviceAccountName"] == "bench" and spec["tolerations"] == TEMPLATE["spec"]["tolerations"]
    assert spec["restartPolicy"] == "Never"
    assert spec["nodeSelector"] == {"pool": "h100", "kubernetes.io/hostname": "gpu-7"}
    (container,) = spec["containers"]
    assert container["image"] == "registry.example/vllm:ops" and "args" not in container
    assert container["command"] == [
        t.replace("{port}", str(kubernetes_pod.SERVE_PORT)) for t in plan.cells[1].serve_argv
    ]
    assert container["resources"] == {"limits": {"nvidia.com/gpu": "4"}}
    assert {"name": "HF_HOME", "value": "/cache"} in container["env"]
    assert [e["value"] for e in container["env"] if e["name"] == "SPECDEC_EXPERIMENT"] == [RUN]
    assert {m["name"] for m in container["volumeMounts"]} == {"cache", "bundle"}
    assert {v["name"] for v in spec["volumes"]} == {"cache", "bundle"}


def test_a_template_that_is_not_a_pod_is_refused_naming_the_field(tmp_path: Path) -> None:
    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump({"kind": "Job", "spec": {"template": {}}}))
    with pytest.raises(ConfigurationError, match="commands.serve_pod_template .* must be a Kubernetes Pod"):
        plan_of(template=path)
    with pytest.raises(ConfigurationError, match="cannot read commands.serve_pod_template"):
        plan_of(template=tmp_path / "missing.yaml")


def test_tolerated_taints_become_pod_tolerations_and_gpu_resource_names_the_accelerator() -> None:
    """The capacity check keeps a node tainted with a `tolerations` key a candidate: the Pod
    must really tolerate it, or it would never be scheduled on the node selected for it."""
    plan = plan_of(selectors={**SELECTORS, "tolerations": "nvidia.com/gpu, dedicated", "gpu_resource": "amd.com/gpu"})
    spec = plan.launches[0].kubernetes.manifest["spec"]
    assert spec["tolerations"] == [{"key": "nvidia.com/gpu", "operator": "Exists"},
                                   {"key": "dedicated", "operator": "Exists"}]
    assert spec["containers"][0]["resources"]["limits"] == {"cpu": "8", "memory": "32Gi", "amd.com/gpu": "2"}
    assert "tolerations" not in plan_of().launches[0].kubernetes.manifest["spec"]


def test_a_template_gets_the_tolerations_it_lacks_and_keeps_its_own(tmp_path: Path) -> None:
    path = tmp_path / "pod.yaml"
    path.write_text(yaml.safe_dump(TEMPLATE))
    plan = plan_of(selectors={"tolerations": "gpu,dedicated"}, template=path)
    assert plan.launches[0].kubernetes.manifest["spec"]["tolerations"] == [
        {"key": "gpu", "operator": "Exists"}, {"key": "dedicated", "operator": "Exists"}]


def test_an_unknown_or_malformed_selector_is_refused_before_approval() -> None:
    with pytest.raises(
        ConfigurationError, match=r"\['gpus'\] mean nothing to scheduler kubernetes; allowed: .*gpu_resource"
    ):
        plan_of(selectors={**SELECTORS, "gpus": "2"})
    with pytest.raises(ConfigurationError, match="capacity.selectors.cpu = 'eight' is not a Kubernetes quantity"):
        plan_of(selectors={**SELECTORS, "cpu": "eight"})


def test_a_pod_template_that_is_not_yaml_is_named_by_position_never_quoted(tmp_path):
    """The template may hold a credential: the error names file, line and column, not the line."""
    from services.bench.executors.kubernetes_pod import load_pod_template
    from services.runtime.errors import ConfigurationError

    path = tmp_path / "pod.yaml"
    path.write_text("kind: Pod\nspec:\n  url: postgres://u:s3cret@db/x: [\n")
    with pytest.raises(ConfigurationError) as caught:
        load_pod_template(str(path))
    assert f"{path}:3:" in str(caught.value) and "s3cret" not in str(caught.value)


def test_a_matrix_file_that_is_not_yaml_is_named_by_position_never_quoted(tmp_path):
    from types import SimpleNamespace

    from services.bench.planning.staging import load_matrix
    from services.runtime.errors import StepFailed

    path = tmp_path / "matrix.yaml"
    path.write_text("cells:\n  - cell_id: a\n    token: hf_s3cretvalue: [\n")
    with pytest.raises(StepFailed) as caught:
        load_matrix(SimpleNamespace(matrix=SimpleNamespace(path=str(path)), shapes_only=None))
    assert f"{path}:3:" in str(caught.value) and "s3cret" not in str(caught.value)
