"""Resuming a half-done bench (services/bench/planning/resume.py) against a real bundle in a temp folder."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from contracts import layout
from services.bench.planning import resume
from services.runtime.bundle.bundle import BundleError, BundleStore

RUN = "toy-20261130-090000-abcdef"


@pytest.fixture
def bundle(tmp_path: Path) -> BundleStore:
    return BundleStore(tmp_path / "bundles", fsync=False)


def test_attempts_are_numbered_and_a_later_one_writes_beside_the_first(bundle: BundleStore) -> None:
    assert resume.begin_attempt(bundle, RUN) == 1
    assert resume.begin_attempt(bundle, RUN) == 2
    assert layout.attempt_folder("bench/ngram/launch-0", 1) == "bench/ngram/launch-0"
    assert layout.attempt_folder("bench/ngram/launch-0", 2) == "bench/ngram/launch-0/attempt-2"


def test_a_recorded_result_is_adopted_with_its_outputs_and_problems(bundle: BundleStore) -> None:
    result = {"generated_texts": ["a", "b", "c"], "prompt_ids": ["p1", "p2", "p3"], "errors": ["", "timeout", ""],
              "speculation_problems": ["no drafts"]}
    ref = bundle.write_bytes(RUN, layout.trial_result("standing", 1, 4), json.dumps(result).encode())
    adopted = resume.adopt(bundle, RUN, "standing", 1, concurrency=4)
    assert adopted is not None and adopted.ref == ref
    assert adopted.outputs == {"p1": "a", "p3": "c"}
    assert adopted.problems == ["no drafts"]


def test_a_trial_without_a_result_is_measured_again_and_one_left_without_its_record_is_adopted(
        bundle: BundleStore) -> None:
    assert resume.adopt(bundle, RUN, "standing", 0, concurrency=1) is None
    # Published whole but never recorded (the writer died between the two): the durable one counts.
    path = bundle.run_dir(RUN) / layout.trial_result("standing", 0, 1)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("{}")
    adopted = resume.adopt(bundle, RUN, "standing", 0, concurrency=1)
    assert adopted is not None and adopted.ref == bundle.ref(RUN, layout.trial_result("standing", 0, 1))


def test_a_recorded_result_changed_on_disk_is_an_error_not_a_fresh_trial(bundle: BundleStore) -> None:
    bundle.write_bytes(RUN, layout.trial_result("ngram", 0, 1), b'{"generated_texts": []}')
    (bundle.run_dir(RUN) / layout.trial_result("ngram", 0, 1)).write_text('{"generated_texts": ["forged"]}')
    with pytest.raises(BundleError, match="cannot be read back"):
        resume.adopt(bundle, RUN, "ngram", 0, concurrency=1)


def test_an_operator_result_has_no_outputs_to_compare() -> None:
    assert resume.outputs_of({"completed": 3, "median_tpot_ms": 1.0}) == {}
    assert resume.outputs_of({"generated_texts": ["a"], "prompt_ids": ["p1", "p2"]}) == {}


def test_a_recorded_rejected_trial_is_adopted_as_the_same_failure(bundle: BundleStore) -> None:
    result = {
        "completed": 4,
        "spec_decode": {"num_drafts": 0},
        "speculation_problems": ["no drafts during the measured window"],
    }
    ref = bundle.write_bytes(RUN, layout.rejected_result("ngram", 2, 1), json.dumps(result).encode())
    adopted = resume.adopt(bundle, RUN, "ngram", 2, concurrency=1)
    assert adopted is not None and adopted.ref == ref
    assert adopted.problems == ["no drafts during the measured window"]
    # Not under the results' name: nothing of it counts as a result.
    assert not (bundle.run_dir(RUN) / layout.trial_result("ngram", 2, 1)).exists()


def test_a_rejected_file_without_reasons_still_fails(bundle: BundleStore) -> None:
    bundle.write_bytes(RUN, layout.rejected_result("ngram", 0, 2), b'{"completed": 4}')
    adopted = resume.adopt(bundle, RUN, "ngram", 0, concurrency=2)
    assert adopted is not None and adopted.problems and "rejected by an earlier attempt" in adopted.problems[0]


def test_the_rejected_name_is_outside_every_results_glob(bundle: BundleStore) -> None:
    import fnmatch

    rejected = layout.rejected_result("ngram", 0, 2)
    assert fnmatch.fnmatch(rejected, layout.REJECTED_GLOB)
    assert not fnmatch.fnmatch(rejected, layout.RESULTS_GLOB)
    assert not fnmatch.fnmatch(layout.trial_result("ngram", 0, 2), layout.REJECTED_GLOB)
