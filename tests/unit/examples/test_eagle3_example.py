"""The example EAGLE-3 trainer's input handling (infra/examples/train_eagle3.py, trainer_data.py,
offline_acceptance.py).

These run in the main venv: the checks here stop before anything imports `speculators`
(the trainer imports it lazily). Training, the checkpoint and serving are covered by
tests/e2e/test_eagle3_tiny.py (`make test`, a tiny head in the main venv) and tests/e2e/test_eagle3.py
(`make test-models`, the full-size head).
"""

from __future__ import annotations

import importlib.util
import json

import pytest

from tests.support.examples import example

eagle3 = example("train_eagle3")
offline = example("offline_acceptance")
data = example("trainer_data")


@pytest.mark.parametrize(("layers", "ids"), [(30, [2, 15, 27]), (32, [2, 16, 29]), (4, [1, 2, 3]), (6, [1, 3, 5])])
def test_default_aux_layers_are_speculators_own_or_spread_for_a_shallow_target(layers, ids):
    assert eagle3.default_aux_layers(layers) == ids
    assert len(set(ids)) == 3 and max(ids) < layers  # vLLM captures ids 0..n-1 inside its layer loop


def test_a_target_of_three_layers_is_refused():
    with pytest.raises(eagle3.TrainEagle3Error, match="three distinct auxiliary layers"):
        eagle3.default_aux_layers(3)


@pytest.mark.parametrize("text", ["1,2", "1,1,2", "3,2,1", "1,2,4", "a,b,c"])
def test_bad_aux_layers_are_refused_by_name(text):
    with pytest.raises(eagle3.TrainEagle3Error, match="--aux-layers"):
        eagle3.parse_layers(text, 4)


def test_bad_input_exits_2_with_one_line(tmp_path, capsys):
    corpus = tmp_path / "c.jsonl"
    corpus.write_text(json.dumps({"messages": [{"role": "user", "content": "hi"}], "split": "train"}) + "\n")
    code = eagle3.main(["--corpus", str(corpus), "--target", str(tmp_path / "none"), "--out", str(tmp_path / "o")])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and "config.json missing" in err[0]
    code = eagle3.main(
        ["--corpus", str(corpus), "--target", str(tmp_path), "--out", str(tmp_path / "o"), "--steps", "0"]
    )
    assert code == 2 and "--steps must be >= 1" in capsys.readouterr().err
    if importlib.util.find_spec("speculators") is None:  # the main venv: the trainer names its environment
        (tmp_path / "config.json").write_text("{}")
        code = eagle3.main(["--corpus", str(corpus), "--target", str(tmp_path), "--out", str(tmp_path / "o")])
        assert code == 2 and "make speculators-env" in capsys.readouterr().err


def test_heldout_reader_keeps_heldout_records_only(tmp_path):
    path = tmp_path / "h.jsonl"
    lines = [{"messages": [{"role": "user", "content": "a"}], "split": "heldout"},
             {"messages": [{"role": "user", "content": "b"}], "split": "train"}, "not json"]
    path.write_text("\n".join(x if isinstance(x, str) else json.dumps(x) for x in lines) + "\n")
    assert data.read_heldout(path) == [[{"role": "user", "content": "a"}]]
    path.write_text(json.dumps(lines[1]) + "\n")
    with pytest.raises(data.ExampleError, match="no record with split 'heldout'"):
        data.read_heldout(path)


def _batch(ids, mask, docs):
    import torch

    return {
        "input_ids": torch.tensor([ids]),
        "loss_mask": torch.tensor([mask]).bool(),
        "document_ids": torch.tensor([docs]),
    }


def test_accepted_counts_need_every_earlier_draft_right():
    import torch

    # One sample: prompt 7, 8; answer 1 2 3 4 5. The greedy token after position i is ids[i + 1].
    batch = _batch([7, 8, 1, 2, 3, 4, 5], [0, 0, 1, 1, 1, 1, 0], [0] * 7)
    right = [torch.tensor([[0, 0, 2, 3, 4, 5, 0]]), torch.tensor([[0, 0, 3, 4, 5, 0, 0]])]
    assert offline.accepted_counts(right, batch, None) == [4, 3]  # position 5's second draft is past the answer
    wrong_first = [torch.tensor([[0, 0, 9, 3, 4, 5, 0]]), right[1]]
    assert offline.accepted_counts(wrong_first, batch, None) == [3, 2]  # position 2 fails at 0, so at 1 too


def test_accepted_counts_map_a_reduced_vocabulary_and_stay_in_their_sample():
    import torch

    d2t = torch.tensor([1, 1, 1, 1, 1, 1])  # draft id d is target id d + 1
    batch = _batch([7, 1, 2, 8, 3, 4], [0, 1, 0, 0, 1, 0], [0, 0, 0, 1, 1, 1])
    drafts = [torch.tensor([[0, 1, 0, 0, 3, 0]]), torch.tensor([[0, 5, 0, 0, 0, 0]])]
    # Position 1 drafts 2 (1 + 1), right; its second draft (6) would reach past its answer: not counted.
    assert offline.accepted_counts(drafts, batch, d2t) == [2, 0]


def test_accepted_counts_never_cross_into_the_next_sample():
    import torch

    batch = _batch([7, 1, 2, 3, 4], [0, 1, 1, 1, 0], [0, 0, 0, 1, 1])
    drafts = [torch.tensor([[0, 2, 3, 4, 0]]), torch.tensor([[0, 3, 4, 0, 0]])]
    # Position 2's second draft (4) equals ids[4], but position 3 belongs to the next sample.
    assert offline.accepted_counts(drafts, batch, None) == [3, 1]


def test_the_demo_campaigns_trainer_is_this_one_in_its_environment_and_every_flag_parses(tmp_path, capsys):
    import yaml

    from services.cli.demo import DEMO_CAMPAIGN, ENVIRONMENTS

    argv = yaml.safe_load(DEMO_CAMPAIGN.read_text())["commands"]["train"]["argv"]
    assert argv[:2] == [".venv-speculators/bin/python", "infra/examples/train_eagle3.py"]
    assert ENVIRONMENTS[argv[0]] == "infra/bin/ensure-speculators-env"  # `specdec demo` builds it first
    values = {"{corpus_train}": str(tmp_path / "t.jsonl"), "{corpus_heldout}": str(tmp_path / "h.jsonl"),
              "{target}": str(tmp_path), "{output_dir}": str(tmp_path / "o")}
    rest = [values.get(token, token) for token in argv[2:]]
    rest[rest.index("--steps") + 1] = "0"  # stops right after argparse accepted every flag
    assert eagle3.main(rest) == 2
    assert capsys.readouterr().err.strip() == "train_eagle3: --steps must be >= 1"


def test_the_demo_refuses_a_trainer_environment_built_elsewhere_than_its_argv_names(tmp_path, monkeypatch):
    import io

    from services.cli import demo
    from services.runtime.errors import ConfigurationError

    script = tmp_path / "ensure"  # stands in for ensure-speculators-env with SPECDEC_SPECULATORS_VENV set
    script.write_text(f"#!/bin/sh\necho {tmp_path}/elsewhere/bin/python\n")
    script.chmod(0o755)
    monkeypatch.setitem(demo.ENVIRONMENTS, ".venv-speculators/bin/python", str(script))
    with pytest.raises(ConfigurationError, match=r"at .*/elsewhere, but the campaign's commands.train.argv\[0\] is "
                                                 r"\.venv-speculators/bin/python: unset SPECDEC_SPECULATORS_VENV"):
        demo.ensure_trainer_env(demo.DEMO_CAMPAIGN, io.StringIO())
