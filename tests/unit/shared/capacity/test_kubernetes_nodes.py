"""The Kubernetes adapter against recorded `kubectl get nodes -o json` and
`kubectl get pods -A -o json` outputs (fixtures/): seven nodes, pods on some,
and a label (`specdec.io/idle: "true"`) that claims idleness on busy nodes."""

from __future__ import annotations

import orjson
import pytest

from contracts.campaign import CapacitySpec
from services.shared.capacity import kubernetes as k8s
from services.shared.capacity.check import check_node
from services.shared.capacity.errors import SchedulerFailed, SchedulerOutputInvalid
from services.shared.scheduler.runner import RunResult

NODES = tuple(k8s.nodes_argv({}))
PODS = tuple(k8s.pods_argv())


@pytest.fixture
def cluster(fixture_text):
    return fixture_text("kubectl-get-nodes.json"), fixture_text("kubectl-get-pods-A.json")


def observed(cluster, **selectors):
    nodes, pods = cluster
    return {n.name: n for n in k8s.assemble(k8s.parse_nodes(nodes, selectors), k8s.parse_pods(pods))}


def spec(**selectors: str) -> CapacitySpec:
    return CapacitySpec(scheduler="kubernetes", selectors=selectors, idle_check=["check", "{node}"])


def test_the_commands_are_the_read_only_json_listings():
    assert list(NODES) == ["kubectl", "get", "nodes", "-o", "json"]
    assert list(PODS) == ["kubectl", "get", "pods", "-A", "-o", "json"]
    assert k8s.nodes_argv({"label_selector": "pool=train"})[-2:] == ["-l", "pool=train"]


def test_nodes_resources_and_labels_are_read(cluster):
    nodes = observed(cluster)
    assert sorted(nodes) == ["cp-1", "cpu-f", "gpu-a", "gpu-b", "gpu-c", "gpu-d", "gpu-e"]
    assert (nodes["gpu-a"].cpus, nodes["gpu-a"].gpus, nodes["gpu-a"].state) == (32, 8, "Ready=True")
    assert nodes["gpu-a"].memory_mb == pytest.approx(263859044 / 1024, abs=0.1)
    assert nodes["gpu-a"].labels["specdec.io/idle"] == "true"


def test_pods_are_placed_and_daemonsets_are_infrastructure(cluster):
    nodes = observed(cluster)
    assert [w.name for w in nodes["gpu-a"].workloads] == ["pretrain-7b-worker-0"]
    assert nodes["gpu-a"].workloads[0].experiment == "pretrain-7b-20261129"
    assert sorted(w.name for w in nodes["gpu-a"].infrastructure) == [
        "kube-proxy-gpu-a",
        "nvidia-device-plugin-daemonset-gpu-a",
    ]
    # Finished pods (Succeeded, Failed) hold nothing; DaemonSet pods are not workloads.
    assert nodes["gpu-b"].workloads == [] and len(nodes["gpu-b"].infrastructure) == 2
    # A bound Pending pod and a terminating pod both occupy their node.
    assert sorted(w.state for w in nodes["cpu-f"].workloads) == ["Pending", "Running (terminating)"]
    # Static mirror pods are infrastructure; a ReplicaSet pod on the control plane is a workload.
    assert [w.name for w in nodes["cp-1"].workloads] == ["coredns-7db6d8ff4d-x2k9p"]
    assert {"kube-apiserver-cp-1", "etcd-cp-1"} <= {w.name for w in nodes["cp-1"].infrastructure}


def test_cordoned_not_ready_and_tainted_nodes_are_blocked(cluster):
    nodes = observed(cluster)
    assert any("cordoned" in b for b in nodes["gpu-c"].blockers)
    assert any("not Ready (NodeStatusUnknown)" in b for b in nodes["gpu-d"].blockers)
    assert nodes["gpu-e"].blockers == [
        "tainted nvidia.com/gpu=present:NoSchedule (add 'nvidia.com/gpu' to capacity.selectors.tolerations "
        "if the pods tolerate it)"
    ]
    assert observed(cluster, tolerations="nvidia.com/gpu, other")["gpu-e"].blockers == []
    assert nodes["gpu-b"].blockers == [] and nodes["gpu-a"].blockers == []


def test_a_busy_node_labelled_idle_is_never_selected(recorded, cluster):
    nodes, pods = cluster
    runner = recorded({NODES: nodes, PODS: pods}, idle_check=lambda argv: 0)
    verdict = check_node(spec(), None, run_id="run-1", runner=runner)
    assert verdict.idle and verdict.node == "gpu-b"
    busy = check_node(
        spec(), "gpu-a", run_id="run-1", runner=recorded({NODES: nodes, PODS: pods}, idle_check=lambda argv: 0)
    )
    assert not busy.idle and busy.node is None
    assert busy.reasons == [
        "node gpu-a: busy with pod ml-team/pretrain-7b-worker-0 'pretrain-7b-worker-0' Running "
        "(experiment=pretrain-7b-20261129) [owner Job/pretrain-7b]"
    ]
    # The idle check is asked only about nodes the workloads left as candidates.
    assert all(call[1] == "gpu-b" for call in runner.calls if call[0] == "check")


def test_idle_check_failure_leaves_no_node(recorded, cluster):
    nodes, pods = cluster
    runner = recorded({NODES: nodes, PODS: pods}, idle_check=lambda argv: 1)
    verdict = check_node(spec(tolerations="nvidia.com/gpu"), None, run_id="run-1", runner=runner)
    assert not verdict.idle
    # gpu-b and gpu-e survive the workloads; the idle check rules out both, in name order.
    assert [c[1] for c in runner.calls if c[0] == "check"] == ["gpu-b", "gpu-e"]
    assert "node gpu-b: idle check ['check', 'gpu-b'] exited 1 (0 means idle)" in verdict.reasons
    assert len(verdict.reasons) >= 7


def test_label_selector_narrows_the_nodes(recorded, cluster):
    nodes, pods = cluster
    data = orjson.loads(nodes)
    data["items"] = [n for n in data["items"] if n["metadata"]["labels"].get("pool") == "serve"]
    argv = tuple(k8s.nodes_argv({"label_selector": "pool=serve"}))
    runner = recorded({argv: orjson.dumps(data).decode(), PODS: pods}, idle_check=lambda argv: 0)
    verdict = check_node(
        spec(label_selector="pool=serve", tolerations="nvidia.com/gpu"), None, run_id="run-1", runner=runner
    )
    assert verdict.idle and verdict.node == "gpu-e"


def test_unreachable_cluster_and_bad_json_fail_loudly(recorded):
    refused = RunResult(argv=NODES, exit_code=1, stdout="",
                        stderr="The connection to the server localhost:8080 was refused", duration_s=0.1)
    with pytest.raises(SchedulerFailed, match="was refused"):
        check_node(spec(), None, run_id="run-1", runner=recorded({NODES: refused}))
    with pytest.raises(SchedulerOutputInvalid):
        check_node(spec(), None, run_id="run-1", runner=recorded({NODES: "not json"}))
    with pytest.raises(SchedulerOutputInvalid, match="items"):
        k8s.parse_pods('{"kind": "Pod"}')


@pytest.mark.parametrize(
    ("text", "value"), [("4", 4.0), ("3500m", 3.5), ("16Gi", 16 * 2**30), ("1000Ki", 1024000.0), ("x", None)]
)
def test_quantities(text, value):
    assert k8s._quantity(text) == value
