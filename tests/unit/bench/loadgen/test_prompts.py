"""Prompts from the corpus's heldout split, or shaped from a workload shape."""

from __future__ import annotations

import json
from pathlib import Path

import orjson
import pytest
import yaml

from contracts.campaign import Campaign, TrafficFile, TrafficShapes
from contracts.events import BenchRequested
from contracts.templates import bench_values
from services.bench.errors import PromptError
from services.bench.loadgen.prompts import (
    ShapeSpec,
    cycle,
    heldout_prompts,
    mixed_shape_prompts,
    shape_shares,
    shaped_prompts,
    source_label,
)
from services.bench.planning.staging import build_prompts, load_matrix
from services.runtime.bundle.bundle import BundleStore

EXAMPLE = Path(__file__).resolve().parents[4] / "infra/examples/campaign.yaml"
WORDS = ("alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu nu xi omicron pi rho sigma tau "
         "upsilon phi chi psi omega one two three four five six seven eight nine ten").split()


def corpus_line(i: int, split: str, *, output_tokens: int = 40, turns=None) -> bytes:
    return orjson.dumps({
        "id": f"{i:016x}",
        "messages": turns or [{"role": "user", "content": f"question {i}"}],
        "reference_completion": None,
        "input_tokens": 10 + i,
        "output_tokens": output_tokens,
        "content_class": "chat",
        "split": split,
    })


@pytest.fixture(scope="module")
def tokenizer_dir(tmp_path_factory) -> Path:
    """A tiny BPE tokenizer folder built locally with `tokenizers`, with a chat template."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    folder = tmp_path_factory.mktemp("tok")
    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=300, special_tokens=["<unk>", "<s>", "</s>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator([" ".join(WORDS)] * 50, trainer=trainer)
    tok.save(str(folder / "tokenizer.json"))
    (folder / "tokenizer_config.json").write_text(json.dumps({
        "bos_token": "<s>", "eos_token": "</s>",
        "chat_template": "{% for m in messages %}<|{{ m.role }}|>{{ m.content }}\n{% endfor %}"
                         "{% if add_generation_prompt %}<|assistant|>{% endif %}",
    }))
    return folder


def test_heldout_split_only_with_own_output_lengths(tmp_path):
    path = tmp_path / "CORPUS.jsonl"
    path.write_bytes(b"\n".join([corpus_line(0, "train"), corpus_line(1, "heldout", output_tokens=33), b"",
                                 corpus_line(2, "heldout", output_tokens=0), corpus_line(3, "train")]) + b"\n")
    prompts = heldout_prompts(path)
    assert [p.prompt_id for p in prompts] == [f"{1:016x}", f"{2:016x}"]
    assert [p.max_output_tokens for p in prompts] == [33, 1]  # an empty traffic output still asks for one token
    assert prompts[0].messages[0].content == "question 1" and prompts[0].input_tokens == 11
    assert prompts[0].text == "question 1" and not prompts[0].ignore_eos
    fixed = heldout_prompts(path, max_output_tokens=64, ignore_eos=True, limit=1)
    assert len(fixed) == 1 and fixed[0].max_output_tokens == 64 and fixed[0].ignore_eos


def test_completion_text_rendered_with_the_chat_template(tmp_path, tokenizer_dir):
    path = tmp_path / "CORPUS.jsonl"
    turns = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi"}]
    path.write_bytes(corpus_line(0, "heldout", turns=turns) + b"\n")
    (with_template,) = heldout_prompts(path, tokenizer_dir=tokenizer_dir)
    assert with_template.text == "<|system|>be brief\n<|user|>hi\n<|assistant|>"
    (plain,) = heldout_prompts(path)
    assert plain.text == "be brief\n\nhi"


def test_heldout_errors_name_the_problem(tmp_path):
    path = tmp_path / "CORPUS.jsonl"
    path.write_bytes(corpus_line(0, "train") + b"\n")
    with pytest.raises(PromptError, match="no heldout records"):
        heldout_prompts(path)
    path.write_bytes(corpus_line(0, "heldout") + b"\n{\"id\": 3}\n")
    with pytest.raises(PromptError, match=r"CORPUS.jsonl:2 is not a corpus record"):
        heldout_prompts(path)
    with pytest.raises(PromptError, match="cannot read corpus"):
        heldout_prompts(tmp_path / "absent.jsonl")


def test_shaped_prompts_have_exact_token_counts(tokenizer_dir):
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(tokenizer_dir / "tokenizer.json"))
    shape = ShapeSpec(name="short", input_tokens=37, output_tokens=12)
    prompts = shaped_prompts(shape, 5, tokenizer_dir=tokenizer_dir, seed=3)
    assert [p.prompt_id for p in prompts] == [f"short-{i}" for i in range(5)]
    for p in prompts:
        assert len(tok.encode(p.text, add_special_tokens=False).ids) == 37 == p.input_tokens
        assert p.max_output_tokens == 12 and p.ignore_eos  # a shape fixes the output length
        assert p.messages[0].content == p.text
    assert len({p.text for p in prompts}) == 5
    assert shaped_prompts(shape, 2, tokenizer_dir=tokenizer_dir, seed=3)[0].text == prompts[0].text  # seeded


def test_shaped_prompts_without_tokenizer_and_profile_shape():
    shape = ShapeSpec.model_validate({"name": "medium", "input_tokens": 20, "output_tokens": 5, "description": "x"})
    (p,) = shaped_prompts(shape, 1)
    assert len(p.text.split()) == 20 and p.input_tokens is None
    with pytest.raises(PromptError, match="tokenizer.json"):
        shaped_prompts(shape, 1, tokenizer_dir="/nonexistent")


@pytest.mark.parametrize(("written", "sent"), [(None, True), (True, True), (False, False)])
def test_shaped_prompts_fix_the_output_length_unless_told_otherwise(written, sent):
    short, medium = ShapeSpec(name="short", input_tokens=3, output_tokens=4), ShapeSpec(name="medium", input_tokens=5,
                                                                                        output_tokens=6)
    prompts = shaped_prompts(short, 2, ignore_eos=written)
    assert [(p.ignore_eos, p.max_output_tokens) for p in prompts] == [(sent, 4), (sent, 4)]  # false: 4 is a cap
    mixed = mixed_shape_prompts([short, medium], 4, ignore_eos=written)
    assert [(p.prompt_id, p.ignore_eos) for p in mixed] == [("short-0", sent), ("medium-0", sent), ("short-1", sent),
                                                            ("medium-1", sent)]


@pytest.mark.parametrize(("written", "sent"), [(None, False), (False, False), (True, True)])
def test_heldout_prompts_end_where_the_model_ends_them_unless_told_otherwise(tmp_path, written, sent):
    path = tmp_path / "CORPUS.jsonl"
    path.write_bytes(corpus_line(0, "train") + b"\n" + corpus_line(1, "heldout") + b"\n")
    (p,) = heldout_prompts(path, ignore_eos=written)
    assert p.ignore_eos is sent


@pytest.mark.parametrize(("written", "sent"), [(None, True), (False, False), (True, True)])
def test_a_shapes_campaigns_prompts_plan_load_and_operator_bench_agree_on_ignore_eos(tmp_path, written, sent):
    """The bench plan's load (load_matrix), every prompt sent (and so the prompts file) and an
    operator bench's placeholders carry one value: the written one, else true for shapes."""
    data = yaml.safe_load(EXAMPLE.read_text())
    data["traffic"] = {"shapes": ["short", "medium"]}
    data["commands"].pop("train")
    data["source_revisions"].pop("trainer")
    data["matrix"]["cells"] = data["matrix"]["cells"][:2]
    data["matrix"]["load"].update(num_prompts=4, ignore_eos=written)
    campaign = Campaign.model_validate(data)
    matrix = load_matrix(campaign)
    assert matrix.load.ignore_eos is sent
    event = BenchRequested(run_id="toy-20261130-010101-abcdef", producer="test", requested_by="test")
    prompts = build_prompts(BundleStore(tmp_path, fsync=False), campaign, matrix, event)
    assert len(prompts) == 4 and {p.ignore_eos for p in prompts} == {sent}
    values = bench_values(matrix.load, concurrency=1, base_url="http://h:1", result_path="r", prompts_path="p")
    assert (values["ignore_eos"], values["ignore_eos_flag"]) == (("true", "--ignore-eos") if sent else ("false", ""))


def test_a_traffic_campaigns_plan_load_ends_at_eos_by_default():
    data = yaml.safe_load(EXAMPLE.read_text())
    data["matrix"]["load"]["ignore_eos"] = None
    assert load_matrix(Campaign.model_validate(data)).load.ignore_eos is False


def test_cycle():
    shape = ShapeSpec(name="s", input_tokens=2, output_tokens=1)
    prompts = shaped_prompts(shape, 2)
    assert [p.prompt_id for p in cycle(prompts, 5)] == ["s-0", "s-1", "s-0", "s-1", "s-0"]
    with pytest.raises(PromptError):
        cycle([], 1)


SHORT = ShapeSpec(name="short", input_tokens=9, output_tokens=3)
MEDIUM = ShapeSpec(name="medium", input_tokens=17, output_tokens=5)
LONG = ShapeSpec(name="long", input_tokens=33, output_tokens=7)


def test_every_listed_shape_is_sent_in_turn_with_an_equal_share(tokenizer_dir):
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(tokenizer_dir / "tokenizer.json"))
    prompts = mixed_shape_prompts([SHORT, MEDIUM, LONG], 8, tokenizer_dir=tokenizer_dir)
    # Prompt i from shape i mod 3, in the order listed; the first 8 mod 3 = 2 shapes take one more.
    assert [p.prompt_id for p in prompts] == ["short-0", "medium-0", "long-0", "short-1", "medium-1", "long-1",
                                              "short-2", "medium-2"]
    sizes = {"short": (9, 3), "medium": (17, 5), "long": (33, 7)}
    for p in prompts:
        want_in, want_out = sizes[p.prompt_id.rsplit("-", 1)[0]]
        assert len(tok.encode(p.text, add_special_tokens=False).ids) == want_in == p.input_tokens
        assert p.max_output_tokens == want_out and p.ignore_eos
    # Each shape draws from its own seed: no prompt starts like another shape's (no shared prefix to cache).
    firsts = {
        tuple(tok.encode(p.text, add_special_tokens=False).ids[:6]) for p in prompts if p.prompt_id.endswith("-0")
    }
    assert len(firsts) == 3
    # Deterministic, and the first shape's prompts are what a one-shape window sends.
    assert mixed_shape_prompts([SHORT, MEDIUM, LONG], 8, tokenizer_dir=tokenizer_dir) == prompts
    assert mixed_shape_prompts([SHORT], 2, tokenizer_dir=tokenizer_dir) == shaped_prompts(
        SHORT, 2, tokenizer_dir=tokenizer_dir
    )


def test_shares_split_the_count_and_fewer_prompts_than_shapes_is_refused():
    assert shape_shares(8, 3) == [3, 3, 2] and shape_shares(6, 3) == [2, 2, 2] and shape_shares(3, 1) == [3]
    assert sum(shape_shares(101, 4)) == 101
    with pytest.raises(PromptError, match=r"cannot cover 3 workload shapes .*num_prompts to 3"):
        mixed_shape_prompts([SHORT, MEDIUM, LONG], 2)
    with pytest.raises(PromptError):
        mixed_shape_prompts([], 2)


def test_the_source_label_is_the_heldout_split_or_the_shapes_joined():
    assert source_label(TrafficFile(path="t.jsonl")) == "corpus-heldout"
    assert source_label(TrafficShapes(shapes=["short"])) == "short"
    assert source_label(TrafficShapes(shapes=["long", "short", "long"])) == "long+short"
