"""The embedded default's data and models (infra/examples/): fast checks on tiny builds.

The sample traffic is checked with the profiler's and the corpus step's own
code (forms, content classes, redaction), so a change on either side that
breaks the demo shows here. Model checks use tiny sizes (a 1-layer model of a
few hundred tokens): they test the builder's and the trainer's behaviour
(template, cache, determinism, draft layout, loss lines), not model quality,
which the e2e test measures through vLLM.
"""

from __future__ import annotations

import hashlib
import json
import math
from pathlib import Path

import pytest

from services.shared.text.chat_template import load_chat_template
from services.shared.text.content import CONTENT_CLASSES, classify
from services.shared.text.forms import parse_object
from services.shared.text.redact import redact
from services.shared.text.tokens import estimate_tokens
from tests.support.examples import example

ROOT = Path(__file__).resolve().parents[3]
EXAMPLES = ROOT / "infra" / "examples"
SAMPLE = EXAMPLES / "sample-traffic.jsonl"
TINY = {"vocab_size": 320, "layers": 2, "hidden": 64, "heads": 1, "intermediate": 128, "max_positions": 512,
        "token_budget": 512, "threads": 1}


traffic_mod = example("make_sample_traffic")
toy = example("toy_target")
trainer = example("train_draft")
offline = example("offline_acceptance")


@pytest.fixture(scope="module")
def small_traffic(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("traffic") / "traffic.jsonl"
    assert traffic_mod.main(["--out", str(path), "--seed", "7", "--lines", "80"]) == 0
    return path


@pytest.fixture(scope="module")
def tiny_target(tmp_path_factory, small_traffic) -> Path:
    out = tmp_path_factory.mktemp("target") / "toy"
    return toy.build_target(small_traffic, out, seed=1, steps=3, log=lambda _: None, **TINY)


# --- sample traffic -----------------------------------------------------------------------------------


def test_generator_is_deterministic_and_seeded(tmp_path):
    a, b, c = tmp_path / "a.jsonl", tmp_path / "b.jsonl", tmp_path / "c.jsonl"
    for path, seed in ((a, 3), (b, 3), (c, 4)):
        assert traffic_mod.main(["--out", str(path), "--seed", str(seed), "--lines", "120"]) == 0
    assert a.read_bytes() == b.read_bytes()
    assert a.read_bytes() != c.read_bytes()
    assert len(a.read_text().splitlines()) == 120


def test_generator_refuses_zero_lines(tmp_path, capsys):
    assert traffic_mod.main(["--out", str(tmp_path / "x.jsonl"), "--lines", "0"]) == 2
    assert "--lines" in capsys.readouterr().err
    assert not (tmp_path / "x.jsonl").exists()


def test_committed_sample_is_what_the_script_makes():
    lines = SAMPLE.read_text(encoding="utf-8").splitlines()
    regenerated = [json.dumps(r, ensure_ascii=False) for r in traffic_mod.generate(0, len(lines))]
    assert lines == regenerated, "regenerate with: python infra/examples/make_sample_traffic.py --out " \
                                 "infra/examples/sample-traffic.jsonl --seed 0 --lines 1000"
    assert 600 <= len(lines) <= 1500
    assert SAMPLE.stat().st_size < 1.5e6


def test_sample_mixes_every_form_and_content_class():
    forms: dict[str, int] = {}
    classes: dict[str, int] = {}
    for raw in SAMPLE.read_text(encoding="utf-8").splitlines():
        record = parse_object(json.loads(raw))  # the profiler's parser: raises on a bad line
        forms[record.form] = forms.get(record.form, 0) + 1
        tokens = record.input_tokens if record.input_tokens is not None else estimate_tokens(record.prompt_text)
        label = classify(record, tokens)
        classes[label] = classes.get(label, 0) + 1
    total = sum(forms.values())
    assert set(forms) == {"openai", "flat", "sharegpt"}
    assert min(forms.values()) / total > 0.1
    assert set(classes) == set(CONTENT_CLASSES)
    assert min(classes.values()) >= 10, classes


def test_sample_plants_every_redaction_target():
    totals: dict[str, int] = {}
    for raw in SAMPLE.read_text(encoding="utf-8").splitlines():
        _, counts = redact(raw)
        for kind, n in counts.items():
            totals[kind] = totals.get(kind, 0) + n
    for kind in ("email", "phone", "openai_key", "card", "ip"):
        assert totals.get(kind, 0) >= 1, f"no {kind} planted: {totals}"


def test_completions_reuse_their_prompts():
    """n-gram speculation needs answers that copy prompt spans: a good share of answers does."""
    copying = 0
    examples = toy.read_examples(SAMPLE)
    for messages, completion in examples:
        prompt_words = " ".join(m["content"] for m in messages).split()
        grams = {tuple(prompt_words[i : i + 3]) for i in range(len(prompt_words) - 2)}
        out = completion.split()
        outs = [tuple(out[i : i + 3]) for i in range(len(out) - 2)]
        if outs and sum(g in grams for g in outs) / len(outs) >= 0.2:
            copying += 1
    assert copying / len(examples) >= 0.2


# --- toy target -----------------------------------------------------------------------------------


def test_tokenizer_and_chat_template(tiny_target, small_traffic):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(tiny_target))
    assert tok.eos_token == "<|end|>" and tok.bos_token == "<|bos|>" and tok.pad_token == "<|pad|>"
    assert len({tok.eos_token_id, tok.bos_token_id, tok.pad_token_id}) == 3
    assert json.loads((tiny_target / "tokenizer_config.json").read_text())["chat_template"] == toy.CHAT_TEMPLATE
    served = load_chat_template(tiny_target)  # what the corpus step's render check uses
    for messages, completion in toy.read_examples(small_traffic)[:30]:
        rendered = tok.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
        assert rendered == toy.render(messages) == served.render(messages)
        ids = tok.encode(toy.render(messages, completion), add_special_tokens=False)
        assert ids[0] == tok.bos_token_id and ids[-2] == tok.eos_token_id
        # byte-level BPE: every text round-trips, accents and kana included
        assert tok.decode(tok.encode(completion, add_special_tokens=False)) == completion


def test_target_config_and_build_record(tiny_target):
    config = json.loads((tiny_target / "config.json").read_text())
    assert config["architectures"] == ["LlamaForCausalLM"]
    assert config["head_dim"] == 64 and config["max_position_embeddings"] == 512
    assert config["vocab_size"] == TINY["vocab_size"]
    record = json.loads((tiny_target / toy.BUILD_FILE).read_text())
    assert len(record["sha256"]) == 64 and record["settings"]["seed"] == 1
    assert math.isfinite(record["final_loss"])
    generation = json.loads((tiny_target / "generation_config.json").read_text())
    assert generation["eos_token_id"] == config["eos_token_id"]


def test_build_is_cached_by_content_and_deterministic(tiny_target, small_traffic, tmp_path):
    logs: list[str] = []
    weights = (tiny_target / "model.safetensors").read_bytes()
    toy.build_target(small_traffic, tiny_target, seed=1, steps=3, log=logs.append, **TINY)
    assert logs and logs[-1].startswith("reused")
    # the same inputs elsewhere give the same bytes; another seed gives others
    again = toy.build_target(small_traffic, tmp_path / "again", seed=1, steps=3, log=lambda _: None, **TINY)
    assert (again / "model.safetensors").read_bytes() == weights
    logs.clear()
    toy.build_target(small_traffic, tmp_path / "again", seed=2, steps=3, log=logs.append, **TINY)
    assert not logs[-1].startswith("reused")
    assert (
        hashlib.sha256((tmp_path / "again" / "model.safetensors").read_bytes()).digest()
        != hashlib.sha256(weights).digest()
    )


def test_build_refuses_a_foreign_folder(small_traffic, tmp_path):
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("keep me")
    with pytest.raises(toy.ToyBuildError, match="not a toy build"):
        toy.build_target(small_traffic, tmp_path / "mine", steps=1, log=lambda _: None, **TINY)
    assert (tmp_path / "mine" / "notes.txt").read_text() == "keep me"


# --- example trainer --------------------------------------------------------------------------------


def _corpus(traffic: Path, path: Path) -> Path:
    lines = []
    for i, (messages, completion) in enumerate(toy.read_examples(traffic)):
        lines.append(json.dumps({"id": f"r{i}", "messages": messages, "reference_completion": completion,
                                 "input_tokens": 1, "output_tokens": 1, "content_class": "chat",
                                 "split": "heldout" if i % 10 == 0 else "train"}))
    lines += ["not json", json.dumps({"id": "x", "split": "train"})]
    path.write_text("\n".join(lines) + "\n")
    return path


def test_trainer_reads_only_the_train_split(small_traffic, tmp_path):
    prompts, skipped = trainer.read_train_split(_corpus(small_traffic, tmp_path / "c.jsonl"))
    n = len(toy.read_examples(small_traffic))
    assert len(prompts) == n - len(range(0, n, 10))
    assert skipped == {"not_json": 1, "not_a_record": 1, "not_train": len(range(0, n, 10))}


def test_draft_starts_from_evenly_spaced_target_layers(tiny_target):
    import torch
    from transformers import LlamaForCausalLM

    target = LlamaForCausalLM.from_pretrained(str(tiny_target))
    draft, picked = trainer.make_draft(target, 1)
    assert picked == [0] and draft.config.num_hidden_layers == 1
    assert draft.config.vocab_size == target.config.vocab_size
    assert torch.equal(draft.model.layers[0].mlp.up_proj.weight, target.model.layers[0].mlp.up_proj.weight)
    with pytest.raises(trainer.TrainDraftError, match="--layers"):
        trainer.make_draft(target, 2)


def test_trainer_cli_writes_a_servable_draft(tiny_target, small_traffic, tmp_path, capsys):
    corpus = _corpus(small_traffic, tmp_path / "corpus.jsonl")
    out = tmp_path / "draft"
    # In process for speed; the e2e test runs it as the trainer-proxy does (argv, child process).
    code = trainer.main(["--corpus", str(corpus), "--target", str(tiny_target), "--out", str(out), "--steps", "3",
                         "--layers", "1", "--max-new-tokens", "4"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    lines = [json.loads(line) for line in captured.out.splitlines()]  # stdout is JSON lines only
    losses = [line for line in lines if "loss" in line]
    assert [line["step"] for line in losses] == [1, 3] and all(math.isfinite(line["loss"]) for line in losses)
    assert lines[-1]["event"] == "summary" and lines[-1]["answers"] > 0
    target_config = json.loads((tiny_target / "config.json").read_text())
    draft_config = json.loads((out / "config.json").read_text())
    assert draft_config["num_hidden_layers"] == 1
    assert draft_config["vocab_size"] == target_config["vocab_size"]
    assert draft_config["max_position_embeddings"] == target_config["max_position_embeddings"]
    assert (out / "tokenizer.json").read_bytes() == (tiny_target / "tokenizer.json").read_bytes()
    assert (out / "model.safetensors").is_file()


def test_trainer_fails_clearly_without_train_records(tiny_target, tmp_path, capsys):
    corpus = tmp_path / "heldout-only.jsonl"
    corpus.write_text(
        json.dumps({"id": "a", "messages": [{"role": "user", "content": "hi"}], "split": "heldout"}) + "\n"
    )
    code = trainer.main(["--corpus", str(corpus), "--target", str(tiny_target), "--out", str(tmp_path / "d")])
    assert code == 2
    assert "no record with split 'train'" in capsys.readouterr().err
    assert not (tmp_path / "d").exists()


# --- offline acceptance of the draft (offline_acceptance.py, method draft_model) ---------------------


def test_a_draft_identical_to_the_target_accepts_every_position(tiny_target):
    import torch
    from transformers import AutoTokenizer, LlamaForCausalLM

    target = LlamaForCausalLM.from_pretrained(str(tiny_target), dtype=torch.float32).eval()
    tokenizer = AutoTokenizer.from_pretrained(str(tiny_target))
    prompts = [[{"role": "user", "content": text}] for text in ("hello there", "what is 2 + 3?", "write a note")]
    pairs, _ = trainer.target_answers(
        target, tokenizer, prompts, max_new_tokens=6, batch_size=2, max_positions=512, log=lambda _: None
    )
    accepted, drafts = trainer.draft_model_counts(target, pairs, 3, 2)
    # The target's own greedy tokens: every draft from every position is right, up to the answer's end.
    assert drafts == sum(len(answer) - 1 for _, answer in pairs) > 0
    assert accepted == [sum(max(0, len(answer) - 1 - j) for _, answer in pairs) for j in range(3)]


def test_draft_counts_stop_at_the_first_wrong_draft():
    import torch

    class Fixed(torch.nn.Module):
        """A 'draft' whose argmax at position i is `tokens[i]` (one-hot logits over a 10-token vocabulary)."""

        def __init__(self, tokens):
            super().__init__()
            self.tokens = torch.tensor(tokens)

        def model(self, input_ids, attention_mask):
            return type("Out", (), {"last_hidden_state": torch.nn.functional.one_hot(
                self.tokens[: input_ids.shape[1]], 10).float().unsqueeze(0)})

        def lm_head(self, hidden):
            return hidden

    # Prompt 7 8, answer 1 2 3 4 5: drafted from positions 2..5 (answer tokens 1..4), each proposing ids[i + 1].
    pair = ([7, 8], [1, 2, 3, 4, 5])
    assert trainer.draft_model_counts(Fixed([0, 0, 2, 3, 4, 5, 0]), [pair], 2, 1) == ([4, 3], 4)
    # Wrong at position 3 (proposes 9, not 3): position 3 fails at 1, position 2 at 2.
    assert trainer.draft_model_counts(Fixed([0, 0, 2, 9, 4, 5, 0]), [pair], 2, 1) == ([3, 1], 4)


def test_trainer_writes_the_offline_estimate_the_report_reads(tiny_target, small_traffic, tmp_path, capsys):
    from contracts.artifacts.offline_acceptance import OFFLINE_ACCEPTANCE_FILE, OfflineAcceptance

    corpus = _corpus(small_traffic, tmp_path / "corpus.jsonl")
    out = tmp_path / "draft"
    code = trainer.main(["--corpus", str(corpus), "--target", str(tiny_target), "--out", str(out), "--steps", "2",
                         "--layers", "1", "--max-new-tokens", "6", "--heldout", str(corpus),
                         "--num-speculative-tokens", "2", "--max-heldout-prompts", "3"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    found = OfflineAcceptance.model_validate_json((out / OFFLINE_ACCEPTANCE_FILE).read_text())
    assert found.method == "draft_model" and found.num_speculative_tokens == 2 and found.heldout_prompts == 3
    assert found.drafts > 0 and found.accepted_per_position[1] <= found.accepted_per_position[0]
    summary = json.loads(captured.out.splitlines()[-1])
    assert summary["offline_acceptance"]["artifact"] == OFFLINE_ACCEPTANCE_FILE


def test_trainer_refuses_offline_options_without_heldout(tiny_target, small_traffic, tmp_path, capsys):
    corpus = _corpus(small_traffic, tmp_path / "corpus.jsonl")
    code = trainer.main(["--corpus", str(corpus), "--target", str(tiny_target), "--out", str(tmp_path / "d"),
                         "--max-heldout-prompts", "3"])
    assert code == 2
    assert "--max-heldout-prompts set the offline estimate, which needs --heldout" in capsys.readouterr().err
    code = trainer.main(["--corpus", str(corpus), "--target", str(tiny_target), "--out", str(tmp_path / "d"),
                         "--heldout", str(tmp_path / "missing.jsonl")])
    assert code == 2 and "cannot read" in capsys.readouterr().err and not (tmp_path / "d").exists()
