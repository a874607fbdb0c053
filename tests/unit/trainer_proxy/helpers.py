"""Shared by the trainer-proxy tests: tiny checkpoints, campaigns, corpora and
operator trainers (small Python scripts the tests write)."""

from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path
from typing import Any

import yaml

from contracts.campaign import Campaign
from services.runtime.bundle import BundleStore

ROOT = Path(__file__).resolve().parents[3]
EXAMPLE = ROOT / "infra/examples/campaign.yaml"
PY = sys.executable


def build_tiny_models(root: Path) -> dict[str, Path]:
    """A target (vocab 100) with a BPE tokenizer, a matching draft, and a draft of vocab 120."""
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    tokenizer = Tokenizer(models.BPE(unk_token="<unk>"))
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=100, special_tokens=["<unk>", "<s>", "</s>"], initial_alphabet=pre_tokenizers.ByteLevel.alphabet()[:60]
    )
    tokenizer.train_from_iterator(["hello world, the quick brown fox jumps over the lazy dog"] * 20, trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tokenizer, unk_token="<unk>", bos_token="<s>", eos_token="</s>")
    torch.manual_seed(0)
    dirs = {}
    for name, vocab in (("target", 100), ("draft", 100), ("draft-vocab120", 120)):
        config = LlamaConfig(
            vocab_size=vocab, hidden_size=64, intermediate_size=128, num_hidden_layers=1, num_attention_heads=2,
            num_key_value_heads=2, max_position_embeddings=128,
        )
        path = root / name
        LlamaForCausalLM(config).save_pretrained(path)
        fast.save_pretrained(path)
        dirs[name] = path
    return dirs


def campaign(
    *,
    train_argv: list[str],
    target: str = "models/toy-target",
    scheduler: str = "local",
    pre_approved: bool = False,
    timeout_s: float = 60.0,
    probe: list[str] | None = None,
    shapes: bool = False,
    selectors: dict[str, str] | None = None,
    reuse: bool = True,
    trainer_revision: str | None = None,
) -> Campaign:
    data: dict[str, Any] = yaml.safe_load(EXAMPLE.read_text())
    data["target"]["checkpoint"] = target
    data["commands"]["train"] = {"argv": train_argv, "probe": probe, "timeout_s": timeout_s, "reuse": reuse}
    if trainer_revision is not None:
        data["source_revisions"]["trainer"] = trainer_revision
    data["capacity"]["scheduler"] = scheduler
    data["capacity"]["selectors"] = selectors or {}
    data["acknowledgements"]["i_understand_this_mutates_cluster"] = pre_approved
    if shapes:
        data["traffic"] = {"shapes": ["short"]}
        data["matrix"]["cells"] = [c for c in data["matrix"]["cells"] if c["cell_id"] != "draft-k3"]
    return Campaign.model_validate(data)


def corpus_bytes(train: int = 6, heldout: int = 2) -> bytes:
    lines = []
    for i in range(train + heldout):
        record = {
            "id": f"{i:016x}",
            "messages": [{"role": "user", "content": f"hello world number {i}"}],
            "reference_completion": "the quick brown fox",
            "input_tokens": 4,
            "output_tokens": 4,
            "content_class": "chat",
            "split": "train" if i < train else "heldout",
        }
        lines.append(json.dumps(record, sort_keys=True))
    return ("\n".join(lines) + "\n").encode()


def seed_run(bundle: BundleStore, run_id: str, camp: Campaign, *, corpus: bytes | None = None) -> None:
    bundle.write_json(run_id, "campaign.json", camp)
    bundle.write_bytes(run_id, "corpus/CORPUS.jsonl", corpus if corpus is not None else corpus_bytes())


def write_script(path: Path, body: str) -> Path:
    """An operator trainer: a Python script run as `python SCRIPT ARGS...`."""
    path.write_text(textwrap.dedent(body).lstrip())
    return path


COPY_TRAINER = """
    import json, os, shutil, sys
    args = dict(zip(sys.argv[1::2], sys.argv[2::2]))
    out = args["--out"]
    shutil.copytree(args["--from"], out, dirs_exist_ok=True)
    with open(os.path.join(out, "trainer-argv.json"), "w") as fh:
        json.dump({"argv": sys.argv, "label": os.environ.get("SPECDEC_EXPERIMENT")}, fh)
    train = [json.loads(line) for line in open(args["--corpus"])]
    for step in range(3):
        print(json.dumps({"step": step, "loss": 2.0 / (step + 1), "records": len(train)}), flush=True)
    print("trainer done", file=sys.stderr)
"""
