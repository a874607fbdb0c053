"""The shared Kubernetes helpers (services.shared.scheduler.kubernetes): labels and
their selector, delete by label, names that stay DNS-1123 and unique."""

from __future__ import annotations

from services.shared.scheduler import kubernetes

RUN = "toy-20261130-010101-abcdef"


def test_labels_selector_and_delete_by_label():
    assert kubernetes.labels(RUN, "bench") == {
        "experiment": RUN, "app.kubernetes.io/managed-by": "specdec", "specdec.io/step": "bench"}
    selector = f"experiment={RUN},app.kubernetes.io/managed-by=specdec,specdec.io/step=training"
    assert kubernetes.label_selector(RUN, "training") == selector
    assert kubernetes.delete_labelled_argv("jobs", "ml", RUN, "training") == [
        "kubectl", "delete", "jobs", "-n", "ml", "-l", selector, "--ignore-not-found"]


def test_long_names_are_cut_with_a_digest_of_their_key():
    assert kubernetes.dns_name("specdec-short", "k") == "specdec-short"
    long = "specdec-" + "x" * 80
    first, second = kubernetes.dns_name(long, "a"), kubernetes.dns_name(long, "b")
    assert len(first) <= 63 and first != second and first[:54] == long[:54]


def test_bundle_volume_is_the_claim_or_the_run_folder():
    assert kubernetes.bundle_volume({"bundle_pvc": "c"}, "/b/r") == {
        "name": "bundle",
        "persistentVolumeClaim": {"claimName": "c"},
    }
    assert kubernetes.bundle_volume({}, "/b/r")["hostPath"] == {"path": "/b/r", "type": "Directory"}
