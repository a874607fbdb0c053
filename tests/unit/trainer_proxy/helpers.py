"""Shared by the trainer-proxy tests: tiny checkpoints, campaigns, corpora and
operator trainers (small Python scripts the tests write)."""

from __future__ import annotations

import functools
import hashlib
import json
import sys
import tempfile
import textwrap
from pathlib import Path
from typing import Any

import yaml

from contracts import layout
from contracts.artifacts.corpus import CorpusManifest, Splits
from contracts.campaign import Campaign
from services.runtime.bundle.bundle import BundleStore
from services.trainer_proxy.planning.inputs import split_corpus

ROOT = Path(__file__).resolve().parents[3]
EXAMPLE = ROOT / "infra/examples/campaign.yaml"
TRAFFIC = ROOT / "infra/examples/sample-traffic.jsonl"
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
        vocab_size=100, special_tokens=["<unk>", "<s>", "</s>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet()[:60],
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
    acknowledged: bool | None = None,
    timeout_s: float = 60.0,
    probe: list[str] | None = None,
    shapes: bool = False,
    selectors: dict[str, str] | None = None,
    reuse: bool = True,
    trainer_revision: str | None = None,
    checkpoint_subdir: str | None = None,
    env: list[str] | None = None,
    progress: dict[str, Any] | None = None,
) -> Campaign:
    data: dict[str, Any] = yaml.safe_load(EXAMPLE.read_text())
    data["target"]["checkpoint"] = target
    data["commands"]["train"] = {"argv": train_argv, "probe": probe, "timeout_s": timeout_s, "reuse": reuse}
    if checkpoint_subdir is not None:
        data["commands"]["train"]["checkpoint_subdir"] = checkpoint_subdir
    if env is not None:
        data["commands"]["train"]["env"] = env
    if progress is not None:
        data["commands"]["train"]["progress"] = progress
    if trainer_revision is not None:
        data["source_revisions"]["trainer"] = trainer_revision
    data["capacity"]["scheduler"] = scheduler
    data["capacity"]["selectors"] = selectors or {}
    # Pre-approval is the acknowledgement and the policy naming training; `acknowledged` alone (no
    # policy) runs nothing: the plan waits for an approval of its hash.
    data["acknowledgements"]["i_understand_this_mutates_cluster"] = (
        pre_approved if acknowledged is None else acknowledged)
    data["review"] = {"pre_approve": ["training"] if pre_approved and not shapes else []}
    if shapes:
        data["traffic"] = {"shapes": ["short"]}
        data["commands"].pop("train")  # refused with shapes: nothing is trained
        data["source_revisions"].pop("trainer")  # refused with shapes: nothing is trained
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


@functools.cache
def profiled(traffic_lines: int = 60, reject_threshold: float = 0.05) -> tuple[bytes, bytes]:
    """PROFILE.json of the first `traffic_lines` lines of the sample traffic, and the manifest the corpus
    step writes beside a corpus built from that profile (both by the real profiler and corpus builder)."""
    from services.corpus.build import build_corpus
    from services.profiler.profile import profile_traffic

    with tempfile.TemporaryDirectory(prefix="tp-profile-") as scratch:
        root = Path(scratch)
        traffic = root / "traffic.jsonl"
        traffic.write_text("\n".join(TRAFFIC.read_text().splitlines()[:traffic_lines]) + "\n")
        profile = root / "PROFILE.json"
        profile.write_text(profile_traffic(traffic, reject_threshold=reject_threshold).model_dump_json(indent=2))
        manifest = build_corpus(profile, traffic, root / "CORPUS.jsonl", max_model_len=512)
        return profile.read_bytes(), manifest.model_dump_json(indent=2).encode()


def manifest_for(corpus: bytes, manifest: bytes) -> bytes:
    """`manifest` describing `corpus`: its hash, size and split counts (the provenance is the manifest's own)."""
    record = CorpusManifest.model_validate_json(manifest)
    split = split_corpus(corpus)
    described = record.model_copy(update={
        "corpus_sha256": hashlib.sha256(corpus).hexdigest(), "corpus_size_bytes": len(corpus),
        "records": Splits(train=split.train_records, heldout=split.heldout_records,
                          total=split.train_records + split.heldout_records),
    })
    return described.model_dump_json(indent=2).encode()


def seed_run(
    bundle: BundleStore, run_id: str, camp: Campaign, *, corpus: bytes | None = None,
    profile: tuple[bytes, bytes] | None = None, corpus_profile: tuple[bytes, bytes] | None = None,
) -> None:
    """A run as the profile and corpus steps leave it: its profile, its corpus and the corpus manifest.

    `profile`: the run's (PROFILE.json, manifest) pair, `profiled()` by default; `corpus_profile`: the
    pair the corpus was built from, when it is not the run's own (a corpus of other traffic)."""
    profile = profile or profiled()
    data = corpus if corpus is not None else corpus_bytes()
    bundle.write_json(run_id, layout.CAMPAIGN, camp)
    bundle.write_bytes(run_id, layout.PROFILE, profile[0])
    bundle.write_bytes(run_id, layout.CORPUS, data)
    bundle.write_bytes(run_id, layout.CORPUS_MANIFEST, manifest_for(data, (corpus_profile or profile)[1]))


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
