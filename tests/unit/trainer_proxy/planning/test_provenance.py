"""A training input must come from this run's profile of this run's traffic
(docs/design.md#training-inputs-come-from-this-run: a profile from a different traffic regime is not a valid
training input). Real bundles on disk, real profiles and manifests (the profiler and corpus builder), no Redis."""

from __future__ import annotations

import hashlib

import pytest

from contracts import layout
from contracts.artifacts.corpus import CorpusManifest
from contracts.artifacts.profile import Profile
from contracts.envelope import Event
from contracts.events import CapacitySelected, TrainingRequested
from services.runtime.bundle.bundle import BundleStore
from services.trainer_proxy.planning.staging import CorpusMismatch, check_provenance, plan_training
from tests.unit.trainer_proxy.helpers import PY, campaign, corpus_bytes, profiled, seed_run

RUN, OTHER = "toy-20261130-030303-abcdef", "toy-20261130-040404-abcdef"


@pytest.fixture
def bundle(tmp_path) -> BundleStore:
    return BundleStore(tmp_path / "bundles", fsync=False)


def camp():
    return campaign(train_argv=[PY, "-c", "pass", "{corpus_train}", "{output_dir}"])


def capacity(bundle: BundleStore, run_id: str = RUN) -> CapacitySelected:
    snapshot = bundle.write_json(run_id, "capacity/snapshot.json", {})
    selected = CapacitySelected(run_id=run_id, producer="test", scheduler="local", node="n1", snapshot=snapshot)
    bundle.append_event(run_id, selected.event_id, selected.to_json())
    return selected


def request(bundle: BundleStore, corpus_run: str) -> Event:  # a TrainingRequested, built at import
    return TrainingRequested(run_id=RUN, producer="test", requested_by="test",
                             inputs={"corpus": bundle.ref(corpus_run, layout.CORPUS)})


def hashes(pair: tuple[bytes, bytes]) -> tuple[str, str | None]:
    """(sha256 of PROFILE.json, sha256 of the traffic it profiled)."""
    return hashlib.sha256(pair[0]).hexdigest(), Profile.model_validate_json(pair[0]).input.sha256


def test_the_runs_own_corpus_is_accepted(bundle) -> None:
    seed_run(bundle, RUN, camp())
    plan, _ = plan_training(bundle, camp(), capacity(bundle))
    assert plan.inputs.corpus.uri == f"bundle://{RUN}/{layout.CORPUS}"


def test_another_runs_corpus_of_this_very_profile_is_accepted(bundle) -> None:
    seed_run(bundle, RUN, camp())
    seed_run(bundle, OTHER, camp(), corpus=corpus_bytes(train=5))
    capacity(bundle)
    plan, _ = plan_training(bundle, camp(), request(bundle, OTHER))
    assert plan.inputs.corpus.uri == f"bundle://{OTHER}/{layout.CORPUS}" and plan.inputs.train_records == 5


def test_a_corpus_of_other_traffic_is_refused_with_both_hashes(bundle) -> None:
    mine, theirs = profiled(), profiled(traffic_lines=40)
    seed_run(bundle, RUN, camp(), profile=mine)
    seed_run(bundle, OTHER, camp(), profile=theirs)
    capacity(bundle)
    with pytest.raises(CorpusMismatch) as err:
        plan_training(bundle, camp(), request(bundle, OTHER))
    (my_profile, my_traffic), (their_profile, their_traffic) = hashes(mine), hashes(theirs)
    assert my_traffic != their_traffic and err.value.error_type == "CorpusMismatch"
    reason = err.value.reason
    assert (f"built from profile sha256 {their_profile}, but this run's profile ({layout.PROFILE}) "
            f"has sha256 {my_profile}") in reason
    assert f"sampled from traffic sha256 {their_traffic}, but this run profiled traffic sha256 {my_traffic}" in reason
    assert f"specdec request corpus {RUN}" in reason
    # Nothing was stored: no splits, no plan.
    assert not (bundle.run_dir(RUN) / layout.TRAINING_PLAN).exists()
    assert not (bundle.run_dir(RUN) / layout.TRAINING_CORPUS_TRAIN).exists()


def test_a_corpus_of_the_same_traffic_under_another_profile_is_refused(bundle) -> None:
    # Same traffic, profiled with another reject threshold: other PROFILE.json bytes.
    mine, theirs = profiled(), profiled(reject_threshold=0.2)
    seed_run(bundle, RUN, camp(), corpus_profile=theirs)
    with pytest.raises(CorpusMismatch) as err:
        plan_training(bundle, camp(), capacity(bundle))
    reason = err.value.reason
    assert f"built from profile sha256 {hashes(theirs)[0]}" in reason and hashes(mine)[0] in reason
    assert "sampled from traffic" not in reason  # the traffic is the profiled one


def test_a_corpus_without_its_manifest_cannot_be_checked(bundle) -> None:
    bundle.write_bytes(OTHER, layout.CORPUS, corpus_bytes())
    seed_run(bundle, RUN, camp())
    with pytest.raises(CorpusMismatch, match="corpus manifest .* cannot be read") as err:
        check_provenance(bundle, RUN, bundle.ref(OTHER, layout.CORPUS))
    assert err.value.error_type == "CorpusUnverifiable"


def test_a_file_that_is_no_corpus_of_the_corpus_step_is_refused(bundle) -> None:
    seed_run(bundle, RUN, camp())
    split = bundle.write_bytes(RUN, layout.corpus_split("train"), corpus_bytes(heldout=0))
    with pytest.raises(CorpusMismatch, match="is not a corpus the corpus step built"):
        check_provenance(bundle, RUN, split)


def test_a_manifest_of_another_corpus_is_refused(bundle) -> None:
    seed_run(bundle, RUN, camp())
    manifest = CorpusManifest.model_validate(bundle.read_json(RUN, layout.CORPUS_MANIFEST))
    bundle.write_bytes(OTHER, layout.CORPUS, corpus_bytes(train=4))
    bundle.write_bytes(OTHER, layout.CORPUS_MANIFEST, manifest.model_dump_json(indent=2).encode())
    with pytest.raises(CorpusMismatch, match="describes a corpus of sha256"):
        check_provenance(bundle, RUN, bundle.ref(OTHER, layout.CORPUS))


def test_a_run_without_a_profile_says_to_profile_first(bundle) -> None:
    seed_run(bundle, OTHER, camp())
    bundle.write_json(RUN, layout.CAMPAIGN, camp())
    with pytest.raises(CorpusMismatch, match=f"has no profile.*specdec request profile {RUN}") as err:
        check_provenance(bundle, RUN, bundle.ref(OTHER, layout.CORPUS))
    assert err.value.error_type == "NoProfile"
