"""The campaign file: the shipped example, every missing input named, shapes-only
rules, speculative config rules, matrix rules and the gate objective grammar."""

from __future__ import annotations

import copy
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import ValidationError

from contracts.campaign import Campaign, GateSpec, LoadSpec, Matrix, SpeculativeConfig, missing_inputs

ROOT = Path(__file__).resolve().parents[4]


@pytest.fixture
def data() -> dict[str, Any]:
    return yaml.safe_load((ROOT / "infra/examples/campaign.yaml").read_text())


def test_the_shipped_example_validates(data):
    campaign = Campaign.model_validate(data)
    assert missing_inputs(data) == []
    assert not campaign.shapes_only
    assert campaign.commands.serve == "builtin"
    assert [c.cell_id for c in campaign.matrix.cells] == ["standing", "ngram-k3", "draft-k3"]
    assert campaign.matrix.cells[2].serving.speculative.needs_training
    assert campaign.acknowledgements.i_understand_this_mutates_cluster is False


def _drop(*path: str) -> Callable[[dict[str, Any]], None]:
    def apply(data: dict[str, Any]) -> None:
        for key in path[:-1]:
            data = data[key]
        del data[path[-1]]

    return apply


def _no_floor(data: dict[str, Any]) -> None:
    for floor in ("acceptance_floor", "acceptance_length_floor", "accuracy_floor"):
        data["gate"][floor] = None


# (what the test removes, how, the words that must name it)
REQUIRED: list[tuple[str, Callable[[dict[str, Any]], None], str]] = [
    ("target.checkpoint", _drop("target", "checkpoint"), "target.checkpoint"),
    ("standing", _drop("standing"), "standing"),
    ("traffic", _drop("traffic"), "traffic"),
    ("commands.train", _drop("commands", "train"), "commands.train.argv"),
    ("commands.serve", _drop("commands", "serve"), "commands.serve"),
    ("commands.bench", _drop("commands", "bench"), "commands.bench"),
    ("commands.eval", _drop("commands", "eval"), "commands.eval"),
    ("matrix", _drop("matrix"), "matrix"),
    ("capacity.idle_check", _drop("capacity", "idle_check"), "capacity.idle_check"),
    ("gate.objective", _drop("gate", "objective"), "gate.objective"),
    ("floors", _no_floor, "a floor"),
]


@pytest.mark.parametrize(("what", "remove", "named"), REQUIRED, ids=[r[0] for r in REQUIRED])
def test_each_missing_input_is_named(data, what, remove, named):
    remove(data)
    missing = missing_inputs(data)
    assert len(missing) == 1, missing
    assert missing[0].startswith(named), missing
    with pytest.raises(ValidationError):
        Campaign.model_validate(data)


# Only a cell serving `{training.output}` needs the trainer: without a matrix none does.
WITHOUT_CELLS = [r for r in REQUIRED if r[0] != "commands.train"]


def test_every_missing_input_is_named_in_one_call(data):
    for _, remove, _ in REQUIRED:
        remove(data)
    missing = missing_inputs(data)
    assert len(missing) == len(WITHOUT_CELLS)
    for (what, _, named), item in zip(WITHOUT_CELLS, missing, strict=True):
        assert item.startswith(named), (what, item)


def test_the_same_items_are_missing_from_an_empty_mapping():
    # An empty file: everything but the trainer (no cell needs one) is named.
    names = [item.split(" ")[0] for item in missing_inputs({})]
    assert "target.checkpoint" in names and "matrix" in names and "commands.train.argv" not in names
    assert len(names) == len(WITHOUT_CELLS)


@pytest.mark.parametrize("raw", [None, [], "text", 3])
def test_a_non_mapping_is_refused(raw):
    assert missing_inputs(raw) == ["the campaign must be a YAML mapping"]


@pytest.mark.parametrize("name", ["serve", "bench", "eval"])
def test_serve_bench_eval_accept_an_argv_instead_of_builtin(data, name):
    data["commands"][name] = {"argv": ["my-tool", "--port", "{port}"]}
    campaign = Campaign.model_validate(data)
    assert getattr(campaign.commands, name).argv.root == ["my-tool", "--port", "{port}"]


@pytest.mark.parametrize("name", ["serve", "bench", "eval"])
def test_serve_bench_eval_refuse_an_empty_choice(data, name):
    data["commands"][name] = None
    assert missing_inputs(data) == [f"commands.{name} (an argv template, or the explicit choice `builtin`)"]


def test_an_ack_token_in_the_train_argv_is_refused(data):
    data["commands"]["train"]["argv"].append("--i-understand-this-mutates-cluster")
    with pytest.raises(ValidationError, match="looks like an acknowledgement"):
        Campaign.model_validate(data)


@pytest.mark.parametrize(("value", "why"), [
    ("/abs/9", "is absolute"), ("C:/out", "is absolute"), ("../9", "climbs out of {output_dir}"),
    ("a/../../b", "climbs out of {output_dir}"), ("", "is empty"), (".", "names {output_dir} itself"),
    ("{run_id}", "holds a brace"), ("a\\b", "backslash"),
])
def test_a_checkpoint_subdir_outside_the_output_dir_is_refused_by_name(data, value, why):
    data["commands"]["train"]["checkpoint_subdir"] = value
    with pytest.raises(ValidationError) as refused:
        Campaign.model_validate(data)
    [error] = refused.value.errors()
    assert error["loc"] == ("commands", "train", "checkpoint_subdir")
    assert error["msg"].startswith("Value error, commands.train.checkpoint_subdir ") and why in error["msg"]
    assert "\n" not in error["msg"]


@pytest.mark.parametrize(("value", "stored"), [("9", "9"), ("./checkpoints//9/", "checkpoints/9")])
def test_a_relative_checkpoint_subdir_is_kept_normalised(data, value, stored):
    data["commands"]["train"]["checkpoint_subdir"] = value
    assert Campaign.model_validate(data).commands.train.checkpoint_subdir == stored


def test_a_template_that_drops_a_declared_field_still_validates_and_submit_checks_refuse_it(data):
    """The model stays backward compatible (stored campaigns keep loading); the
    refusal is specdec submit's (contracts/templates/check.py)."""
    from contracts.templates import template_problems

    data["matrix"]["cells"][1]["serving"]["max_num_seqs"] = 8
    data["matrix"]["cells"][1]["vllm_sweep"] = {"serve_cmd": ["vllm-wrapper", "--port", "{port}"]}
    campaign = Campaign.model_validate(data)
    assert any("serving.max_num_seqs = 8" in p for p in template_problems(campaign, campaign.matrix))


def test_a_flag_placeholder_inside_a_token_is_refused(data):
    data["commands"]["serve"] = {"argv": ["vllm-wrapper", "--eager={enforce_eager_flag}"]}
    with pytest.raises(ValidationError, match="stands for a whole argv token"):
        Campaign.model_validate(data)


def test_an_unknown_placeholder_in_the_idle_check_is_refused(data):
    data["capacity"]["idle_check"] = ["check", "{gpu}"]
    with pytest.raises(ValidationError, match=r"unknown placeholder \{gpu\}"):
        Campaign.model_validate(data)


# --- shapes-only ------------------------------------------------------------------


def shapes_only(data: dict[str, Any]) -> dict[str, Any]:
    data = copy.deepcopy(data)
    data["traffic"] = {"shapes": ["short", "medium"]}
    del data["commands"]["train"]
    data["source_revisions"].pop("trainer")  # refused with shapes: nothing is trained
    data["matrix"]["cells"] = [c for c in data["matrix"]["cells"] if c["cell_id"] != "draft-k3"]
    return data


def test_a_shapes_only_campaign_needs_no_train_command(data):
    campaign = Campaign.model_validate(shapes_only(data))
    assert campaign.shapes_only
    assert campaign.commands.train is None


def test_a_shapes_only_campaign_refuses_a_candidate_that_needs_training(data):
    shaped = shapes_only(data)
    shaped["matrix"]["cells"] = data["matrix"]["cells"]  # puts draft-k3 ({training.output}) back
    with pytest.raises(ValidationError, match="draft-k3 needs a trained draft"):
        Campaign.model_validate(shaped)


def test_a_shapes_only_campaign_accepts_an_existing_draft_checkpoint(data):
    shaped = shapes_only(data)
    draft = copy.deepcopy(data["matrix"]["cells"][2])
    draft["serving"]["speculative"]["model"] = "/models/draft-existing"
    shaped["matrix"]["cells"].append(draft)
    campaign = Campaign.model_validate(shaped)
    assert not campaign.matrix.cells[-1].serving.speculative.needs_training


def test_traffic_with_a_path_still_needs_the_train_command(data):
    del data["commands"]["train"]
    assert [m.split(" ")[0] for m in missing_inputs(data)] == ["commands.train.argv"]


# --- speculative configs ----------------------------------------------------------


@pytest.mark.parametrize("method", ["draft_model", "eagle", "eagle3", "medusa"])
def test_model_based_methods_need_a_model(method):
    with pytest.raises(ValidationError, match="needs `model`"):
        SpeculativeConfig(method=method, num_speculative_tokens=3)
    assert SpeculativeConfig(method=method, num_speculative_tokens=3, model="/d").model == "/d"


@pytest.mark.parametrize("method", ["ngram", "suffix", "mtp"])
def test_model_free_methods_refuse_a_model(method):
    with pytest.raises(ValidationError, match="takes no `model`"):
        SpeculativeConfig(method=method, num_speculative_tokens=3, model="/d")


def test_prompt_lookup_min_must_not_exceed_max():
    with pytest.raises(ValidationError, match="prompt_lookup_min must not exceed"):
        SpeculativeConfig(method="ngram", num_speculative_tokens=3, prompt_lookup_min=5, prompt_lookup_max=2)
    ok = SpeculativeConfig(method="ngram", num_speculative_tokens=3, prompt_lookup_min=3, prompt_lookup_max=3)
    assert (ok.prompt_lookup_min, ok.prompt_lookup_max) == (3, 3)


def test_prompt_lookup_applies_to_ngram_only():
    with pytest.raises(ValidationError, match="ngram method only"):
        SpeculativeConfig(method="suffix", num_speculative_tokens=3, prompt_lookup_max=2)


@pytest.mark.parametrize("k", [0, 33])
def test_num_speculative_tokens_is_bounded(k):
    with pytest.raises(ValidationError, match="num_speculative_tokens"):
        SpeculativeConfig(method="ngram", num_speculative_tokens=k)


def test_needs_training_only_for_the_training_output_placeholder():
    assert SpeculativeConfig(method="draft_model", num_speculative_tokens=2, model="{training.output}").needs_training
    assert not SpeculativeConfig(method="draft_model", num_speculative_tokens=2, model="/d").needs_training


# --- matrix -------------------------------------------------------------------------


def cell(cell_id: str, role: str) -> dict[str, Any]:
    return {"cell_id": cell_id, "role": role}


def test_a_matrix_needs_exactly_one_standing_cell():
    assert len(Matrix.model_validate({"cells": [cell("s", "standing"), cell("c", "candidate")]}).cells) == 2
    with pytest.raises(ValidationError, match="exactly one standing"):
        Matrix.model_validate({"cells": [cell("c1", "candidate"), cell("c2", "candidate")]})
    with pytest.raises(ValidationError, match="exactly one standing"):
        Matrix.model_validate({"cells": [cell("s1", "standing"), cell("s2", "standing")]})


def test_cell_ids_are_unique():
    with pytest.raises(ValidationError, match=r"duplicate cell_id in matrix: \['c'\]"):
        Matrix.model_validate({"cells": [cell("s", "standing"), cell("c", "candidate"), cell("c", "candidate")]})


@pytest.mark.parametrize("bad", ["../up", "a/b", "", ".hidden"])
def test_cell_ids_are_safe_path_components(bad):
    with pytest.raises(ValidationError, match="cell_id"):
        Matrix.model_validate({"cells": [cell(bad, "standing")]})


def test_the_matrix_rules_apply_inside_a_campaign(data):
    data["matrix"]["cells"][1]["role"] = "standing"
    with pytest.raises(ValidationError, match="exactly one standing"):
        Campaign.model_validate(data)


# --- gate objective -----------------------------------------------------------------


@pytest.mark.parametrize("objective", ["tpot", "tpot:p99", "ttft:median", "e2el:mean", "itl:p99.9", "itl:p50"])
def test_latency_objectives_are_accepted(objective):
    assert GateSpec(objective=objective, acceptance_floor=0.1).objective == objective


@pytest.mark.parametrize("objective", ["output_throughput", "acceptance_rate", "acceptance_length:p50"])
def test_an_objective_that_is_not_a_latency_is_refused_and_pointed_to_the_guards(objective):
    with pytest.raises(ValidationError, match="is not a latency metric.*list it under gate.guards"):
        GateSpec(objective=objective, acceptance_floor=0.1)


def test_guards_take_any_metric_and_refuse_repeats_and_misplaced_statistics():
    spec = GateSpec(objective="tpot", acceptance_floor=0.1, guards=["output_throughput", "ttft:p99", "acceptance_rate"])
    assert spec.guards == ["output_throughput", "ttft:p99", "acceptance_rate"]
    assert GateSpec(objective="tpot", acceptance_floor=0.1).guards == []
    for guards, message in (
        (["tpot:median"], "repeats the objective"),
        (["ttft", "ttft:median"], "repeats the objective or another guard"),
        (["acceptance_rate:p99"], "one figure per trial"),
        (["throughput"], "is not METRIC"),
        (["ttft:p0"], "strictly between p0 and p100"),
    ):
        with pytest.raises(ValidationError, match=message):
            GateSpec(objective="tpot", acceptance_floor=0.1, guards=guards)


def test_an_acceptance_guard_without_standing_speculation_is_refused(data):
    data["standing"] = None
    data["gate"]["guards"] = ["acceptance_rate"]
    with pytest.raises(ValidationError, match="the standing config is null.*acceptance_floor"):
        Campaign.model_validate(data)
    data["gate"]["guards"] = ["output_throughput"]
    assert Campaign.model_validate(data).gate.guards == ["output_throughput"]


def test_the_campaigns_latency_metrics_are_the_gates():
    from contracts.artifacts.trials import LATENCY_METRICS
    from contracts.campaign import LATENCY_OBJECTIVES

    assert LATENCY_OBJECTIVES == LATENCY_METRICS


@pytest.mark.parametrize(
    "objective", ["latency", "tpot:max", "tpot:", "TPOT", "tpot:p999", "tpot p99", ":p99", "tpot:p99:mean", "tpot:p"]
)
def test_objectives_outside_the_grammar_are_refused(objective):
    with pytest.raises(ValidationError, match="is not METRIC"):
        GateSpec(objective=objective, acceptance_floor=0.1)


@pytest.mark.parametrize(
    ("field", "value"),
    [("acceptance_floor", 1.5), ("acceptance_floor", -0.1), ("acceptance_length_floor", 0.5), ("accuracy_floor", 2)],
)
def test_floors_are_bounded(field, value):
    with pytest.raises(ValidationError, match=field):
        GateSpec(objective="tpot", **{field: value})


def test_publish_target_scheme_is_checked(data):
    data["publish"] = {"target": "ftp://somewhere"}
    with pytest.raises(ValidationError, match="must start with file://, https://, http:// or s3://"):
        Campaign.model_validate(data)


@pytest.mark.parametrize("target", ["file://published", "https://reports.example/upload", "s3://reports/specdec/runs"])
def test_publish_target_accepts_a_directory_a_url_or_an_s3_prefix(data, target):
    data["publish"] = {"target": target}
    assert Campaign.model_validate(data).publish.target == target


# --- values that would otherwise change silently ---------------------------------------


def test_burstiness_without_a_request_rate_is_refused_naming_both(data):
    from contracts.campaign import LoadSpec

    data["matrix"]["load"]["burstiness"] = 0.5
    with pytest.raises(
        ValidationError, match=r"matrix.load.burstiness 0.5 needs matrix.load.request_rate.*set request_rate"
    ):
        Campaign.model_validate(data)
    data["matrix"]["load"]["request_rate"] = 4.0
    assert Campaign.model_validate(data).matrix.load.burstiness == 0.5
    assert LoadSpec().burstiness == 1.0 and LoadSpec(request_rate=2).burstiness == 1.0


def test_client_processes_above_a_cells_lowest_level_is_refused_naming_the_cells(data):
    data["matrix"]["load"]["client_processes"] = 2  # the example's cells measure levels [1, 4]
    with pytest.raises(ValidationError, match=r"matrix.load.client_processes 2 splits .* but cells \{'standing': 1"):
        Campaign.model_validate(data)
    for cell in data["matrix"]["cells"]:
        cell["concurrency"] = [2, 4]
    assert Campaign.model_validate(data).matrix.load.client_processes == 2
    assert LoadSpec().client_processes == 1


@pytest.mark.parametrize("value", [0, 1])
def test_a_min_trials_the_gate_cannot_honour_is_refused(value):
    with pytest.raises(ValidationError, match=r"gate.min_trials .*needs at least 2 trials per arm; set gate.min_trials"
                                              if value else "greater than or equal to 1"):
        GateSpec(objective="tpot", acceptance_floor=0.1, min_trials=value)
    assert GateSpec(objective="tpot", acceptance_floor=0.1, min_trials=2).min_trials == 2


@pytest.mark.parametrize("scheduler", ["local", "slurm"])
@pytest.mark.parametrize(
    ("where", "field"),
    [
        (("commands", "serve_pod_template"), "commands.serve_pod_template"),
        (("commands", "train", "kubernetes_job"), "commands.train.kubernetes_job"),
    ],
)
def test_kubernetes_templates_are_refused_on_other_schedulers(data, scheduler, where, field):
    *parents, key = where
    holder = data
    for name in parents:
        holder = holder[name]
    holder[key] = "infra/k8s/template.yaml"
    data["capacity"]["scheduler"] = scheduler
    with pytest.raises(ValidationError, match=rf"{field} set, but capacity.scheduler is {scheduler}: .*kubernetes"):
        Campaign.model_validate(data)
    data["capacity"]["scheduler"] = "kubernetes"
    assert Campaign.model_validate(data).capacity.scheduler == "kubernetes"


def test_a_cells_workload_shape_is_unset_unless_written(data):
    # Unset: the bench plan derives it from the prompt source (tests/unit/bench/planning/test_plan.py).
    assert {cell.workload_shape for cell in Campaign.model_validate(data).matrix.cells} == {None}
    data["matrix"]["cells"][0]["workload_shape"] = "corpus-heldout"
    assert Campaign.model_validate(data).matrix.cells[0].workload_shape == "corpus-heldout"


@pytest.mark.parametrize(("edit", "named"), [
    (lambda d: d["commands"].__setitem__("train", {"argv": ["python", "train.py", "{output_dir}"]}), "commands.train"),
    (lambda d: d.__setitem__("corpus", {"seed": 7}), "corpus.seed"),
    (lambda d: d.__setitem__("corpus", {"size": 40, "heldout_share": 0.3}), "corpus.size, corpus.heldout_share"),
    # Read only by the training input key: nothing is trained.
    (lambda d: d["source_revisions"].__setitem__("trainer", "trainer@v2"), "source_revisions.trainer"),
])
def test_a_shapes_campaign_refuses_a_trainer_or_corpus_it_would_ignore(data, edit, named):
    shaped = shapes_only(data)
    edit(shaped)
    with pytest.raises(
        ValidationError, match=rf"{named} set, but traffic is named shapes \(short, medium\).*trains nothing"
    ):
        Campaign.model_validate(shaped)
    shaped = shapes_only(data)
    shaped["corpus"] = {"seed": 0}  # the default: nothing to ignore
    assert Campaign.model_validate(shaped).shapes_only


def test_a_shapes_campaign_refusing_the_trainers_revision_says_what_to_do(data):
    shaped = shapes_only(data)
    shaped["source_revisions"]["trainer"] = "infra/examples/train_draft.py@local"
    with pytest.raises(ValidationError) as refused:
        Campaign.model_validate(shaped)
    message = str(refused.value)
    assert "source_revisions.trainer set, but traffic is named shapes (short, medium)" in message
    assert "trains nothing, so nothing would read them; remove them, or give traffic.path" in message
    assert Campaign.model_validate(data).source_revisions.trainer  # with traffic it enters the training input key


def test_the_targets_revision_on_a_shapes_campaign_is_accepted_and_recorded_as_inert(data):
    from contracts.inert import inert_fields_set

    shaped = shapes_only(data)
    assert shaped["source_revisions"]["target"] == "toy-target@local"
    campaign = Campaign.model_validate(shaped)
    assert campaign.source_revisions.target == "toy-target@local"  # kept: the report and the bundle print it
    assert inert_fields_set(campaign) == {"source_revisions.target": (
        "where nothing is trained (traffic.shapes, or no cell serves `{training.output}`): provenance label: "
        "printed in the report and the bundle, changes no run")}
    assert inert_fields_set(Campaign.model_validate(data)) == {}  # with traffic: the training input key reads it
    shaped["source_revisions"].pop("target")
    assert inert_fields_set(Campaign.model_validate(shaped)) == {}  # not set: nothing to warn about


# --- matrix.load.ignore_eos -------------------------------------------------------


@pytest.mark.parametrize(("written", "shapes", "sent"), [
    (None, True, True), (None, False, False),  # unset: a shape fixes the output length, traffic ends at EOS
    (True, True, True), (True, False, True), (False, True, False), (False, False, False),  # written: honoured
])
def test_ignore_eos_is_the_written_value_else_the_prompt_sources_default(data, written, shapes, sent):
    data["matrix"]["load"]["ignore_eos"] = written
    matrix = (Campaign.model_validate(shapes_only(data) if shapes else data)).matrix
    assert matrix.load.ignore_eos is written  # the campaign keeps what was written
    assert matrix.load.effective_ignore_eos(shapes=shapes) is sent
    decided = matrix.for_traffic(shapes=shapes)
    assert decided.load.ignore_eos is sent and decided.cells == matrix.cells
    assert decided.load.model_dump(exclude={"ignore_eos"}) == matrix.load.model_dump(exclude={"ignore_eos"})


def test_ignore_eos_is_unset_by_default(data):
    data["matrix"]["load"].pop("ignore_eos", None)
    assert Campaign.model_validate(data).matrix.load.ignore_eos is None


def test_a_matrix_files_cell_env_is_refused_on_kubernetes_as_an_inline_one_is(data, tmp_path):
    """The campaign model refuses an inline cell's env on Kubernetes; a matrix file is read by submit's checks."""
    from services.app.campaign.prepare import _kubernetes_file_env

    data["capacity"]["scheduler"] = "kubernetes"
    data["matrix"]["cells"][0]["env"] = ["HF_TOKEN"]
    with pytest.raises(ValidationError, match="env .*capacity.scheduler is kubernetes"):
        Campaign.model_validate(data)
    (tmp_path / "matrix.yaml").write_text(yaml.safe_dump(data["matrix"]))
    data["matrix"] = {"path": str(tmp_path / "matrix.yaml")}
    [problem] = _kubernetes_file_env(Campaign.model_validate(data))
    assert "HF_TOKEN" in problem and "matrix.path" in problem and "kubernetes" in problem
    data["capacity"]["scheduler"] = "slurm"
    assert _kubernetes_file_env(Campaign.model_validate(data)) == []
