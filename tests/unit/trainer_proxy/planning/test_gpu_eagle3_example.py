"""infra/examples/gpu-eagle3-campaign.yaml: `speculators train` itself as the trainer on a
Slurm GPU node. No GPU runs here, so what is checked is everything short of training: the
campaign is accepted, the plan renders the argv with specdec's placeholders filled and
the sbatch line asks for the GPU, and the rendered argv parses and validates with
speculators 0.9.0's own `speculators train` parser (installed in .venv by `make setup`),
so a flag speculators renames or removes fails here instead of on the cluster."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from contracts.campaign import Campaign
from services.trainer_proxy.planning.builder import build_plan
from services.trainer_proxy.planning.model import SlurmLaunch
from tests.unit.trainer_proxy.helpers import ROOT
from tests.unit.trainer_proxy.planning.test_training_plan import INPUTS, PATHS, RUN

GPU_EXAMPLE = ROOT / "infra/examples/gpu-eagle3-campaign.yaml"
TARGET = "/shared/models/Llama-3.1-8B-Instruct"
OUTPUT = f"{PATHS.run_dir}/training/output"


def _campaign() -> Campaign:
    return Campaign.model_validate(yaml.safe_load(GPU_EXAMPLE.read_text()))


def _rendered_argv() -> list[str]:
    plan = build_plan(_campaign(), run_id=RUN, node="gpu07", scheduler="slurm", paths=PATHS, inputs=INPUTS)
    assert isinstance(plan.launch, SlurmLaunch)
    return plan.launch.argv


def test_the_gpu_example_is_a_slurm_gpu_campaign_training_an_eagle3_head():
    camp = _campaign()
    assert camp.capacity.scheduler == "slurm"
    assert camp.capacity.selectors == {"partition": "gpu", "gres": "gpu:1"}
    trained = [c for c in camp.matrix.cells if c.serving.speculative and c.serving.speculative.needs_training]
    assert [(c.cell_id, c.serving.speculative.method) for c in trained] == [("eagle3-k3", "eagle3")]


def test_the_plan_renders_speculators_train_with_the_placeholders_filled():
    plan = build_plan(_campaign(), run_id=RUN, node="gpu07", scheduler="slurm", paths=PATHS, inputs=INPUTS)
    launch = plan.launch
    assert isinstance(launch, SlurmLaunch)
    assert launch.argv == [
        "speculators", "train", "--speculator-type", "eagle3", "--verifier-name-or-path", TARGET,
        "--data-path", f"/shared/specdec-eagle3/{RUN}", "--on-missing", "raise", "--hidden-states-dtype", "bfloat16",
        "--total-seq-len", "4096", "--num-layers", "1", "--ttt-steps", "3", "--draft-vocab-size", "32000",
        "--epochs", "10", "--lr", "1e-3", "--seed", "0", "--save-path", OUTPUT,
    ]
    # speculators saves epoch e's head in {output_dir}/e/: the last of 10 is what is probed and served.
    assert plan.output_dir == OUTPUT and plan.checkpoint_dir == f"{OUTPUT}/9"
    assert plan.expected_outputs[0].startswith(f"{OUTPUT}/9: a draft checkpoint directory")
    sbatch = launch.sbatch_argv
    assert sbatch[sbatch.index("--gres") + 1] == "gpu:1" and sbatch[sbatch.index("--partition") + 1] == "gpu"
    assert sbatch[sbatch.index("--nodelist") + 1] == "gpu07"
    assert sbatch[sbatch.index("--time") + 1] == "362"  # (21600 s + 10 s grace) -> 361 min, + 1


def test_the_rendered_argv_parses_with_speculators_own_train_parser():
    from speculators.train.config import TrainConfig

    argv = _rendered_argv()
    cfg = TrainConfig.resolve(argv[2:]).flatten()  # argv[:2] is the console script and its subcommand
    assert cfg["speculator_type"] == "eagle3" and cfg["verifier_name_or_path"] == TARGET
    assert cfg["data_path"] == f"/shared/specdec-eagle3/{RUN}" and cfg["save_path"] == OUTPUT
    assert (cfg["num_layers"], cfg["ttt_steps"], cfg["draft_vocab_size"], cfg["total_seq_len"]) == (1, 3, 32000, 4096)
    assert (cfg["epochs"], cfg["lr"], cfg["on_missing"], cfg["hidden_states_dtype"]) == (10, 1e-3, "raise", "bfloat16")


def test_speculators_parser_refuses_a_flag_it_does_not_have(capsys):
    """The check above has teeth: a flag the parser lacks is exit 2, not ignored."""
    from speculators.train.config import TrainConfig

    argv = _rendered_argv()
    renamed = [("--num-draft-layers" if token == "--num-layers" else token) for token in argv[2:]]
    with pytest.raises(SystemExit) as stop:
        TrainConfig.resolve(renamed)
    assert stop.value.code == 2 and "--num-draft-layers" in capsys.readouterr().err


def test_speculators_train_saves_each_epoch_in_a_subfolder_of_the_save_path(tmp_path: Path):
    """Pins speculators' layout that the example's checkpoint_subdir relies on: the head of epoch e
    lands in {output_dir}/e/, so with --epochs 10 the last head is {output_dir}/9."""
    from speculators.train.checkpointer import SingleGPUCheckpointer

    checkpointer = SingleGPUCheckpointer(tmp_path)
    assert checkpointer.model_path(9) == tmp_path / "9" / "model.safetensors"
    train = _campaign().commands.train
    assert train is not None
    epochs = int(train.argv.root[train.argv.root.index("--epochs") + 1])
    assert train.checkpoint_subdir == str(epochs - 1)
