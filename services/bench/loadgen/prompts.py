"""The prompts a measured window sends: the corpus's heldout split, or synthetic prompts shaped from a profile.

Every listed shape is sent, in turn, each from its own seed so that no prompt is a prefix of another
shape's (the server's prefix cache would serve it). `source_label` is every trial's `workload_shape`
(docs/bench-loadgen.md#prompts-promptspy)."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import numpy as np
import orjson
from pydantic import Field, ValidationError, model_validator

from contracts.artifacts.corpus import ChatMessage, CorpusRecord
from contracts.campaign import effective_ignore_eos
from contracts.campaign.traffic import source_label  # noqa: F401 - the bench's name for it (prompts.source_label)
from contracts.envelope import Strict
from services.bench.errors import PromptError
from services.shared.text.chat_template import load_chat_template


class ChatTurn(Strict):
    """One chat message sent to /v1/chat/completions."""

    role: str = Field(min_length=1, description="Chat role: system, user, assistant, tool, ...")
    content: str = Field(description="The message text.")


class Prompt(Strict):
    """One request's input and output budget."""

    prompt_id: str = Field(min_length=1, description="Corpus record ID, or shape name and index.")
    messages: list[ChatTurn] = Field(min_length=1, description="The prompt in chat form (chat endpoint).")
    text: str = Field(description="The prompt as one string (completions endpoint).")
    input_tokens: int | None = Field(
        ge=0, description="Prompt length in tokens as known before sending; None if unknown."
    )
    max_output_tokens: int = Field(ge=1, description="max_tokens of the request.")
    ignore_eos: bool = Field(
        description="True when the output must run to max_output_tokens (matrix.load.ignore_eos; by default true for "
        "shapes, false for heldout prompts)."
    )


class ShapeSpec(Strict):
    """A workload shape's lengths (`contracts.artifacts.profile.Shape` has the same fields)."""

    name: str = Field(min_length=1, description="Shape name (identity).")
    input_tokens: int = Field(ge=1, description="Prompt length, tokens.")
    output_tokens: int = Field(ge=1, description="Output length, tokens.")

    @model_validator(mode="before")
    @classmethod
    def _drop_description(cls, data: object) -> object:
        # Accept a `Shape` dumped as a dict: its description is prose, not a length.
        if isinstance(data, dict) and "description" in data:
            data = {k: v for k, v in data.items() if k != "description"}
        return data


def heldout_prompts(
    corpus_path: str | Path,
    *,
    limit: int | None = None,
    tokenizer_dir: str | Path | None = None,
    max_output_tokens: int | None = None,
    ignore_eos: bool | None = None,
) -> list[Prompt]:
    """The heldout records of CORPUS.jsonl as prompts, in file order.

    `max_output_tokens` overrides every record's own output length (a profile's
    figure); records whose traffic output was empty get 1. `ignore_eos` is
    matrix.load.ignore_eos (None: false). Raises PromptError
    naming the line when a record is malformed, and when the split is empty.
    """
    path = Path(corpus_path)
    try:
        lines = path.read_bytes().splitlines()
    except OSError as err:
        raise PromptError(
            f"cannot read corpus {path}: {err.strerror or err}; pass the CORPUS.jsonl the corpus step wrote"
        ) from err
    render = _completion_renderer(tokenizer_dir)
    ignore_eos = effective_ignore_eos(ignore_eos, shapes=False)
    prompts: list[Prompt] = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            record = CorpusRecord.model_validate(orjson.loads(line))
        except (orjson.JSONDecodeError, ValidationError) as err:
            raise PromptError(f"{path}:{number} is not a corpus record ({_short(err)}); rebuild the corpus") from None
        if record.split != "heldout":
            continue
        budget = max_output_tokens if max_output_tokens is not None else max(1, record.output_tokens)
        prompts.append(
            Prompt(
                prompt_id=record.id,
                messages=[ChatTurn(role=m.role, content=m.content) for m in record.messages],
                text=render(record.messages),
                input_tokens=record.input_tokens,
                max_output_tokens=budget,
                ignore_eos=ignore_eos,
            )
        )
        if limit is not None and len(prompts) >= limit:
            break
    if not prompts:
        raise PromptError(f"{path} has no heldout records; build the corpus with a heldout share above 0")
    return prompts


def shaped_prompts(
    shape: ShapeSpec,
    count: int,
    *,
    tokenizer_dir: str | Path | None = None,
    seed: int = 0,
    ignore_eos: bool | None = None,
) -> list[Prompt]:
    """`count` synthetic prompts of the shape's input length, output fixed at its output length.

    `ignore_eos` is matrix.load.ignore_eos: None (the default) or true fixes the output
    length; false lets the model end early, the shape's output length then a cap.

    With a tokenizer folder (tokenizer.json) the text is built from random vocabulary
    tokens and trimmed until it re-encodes to exactly `input_tokens` tokens. Without
    one, the text is `input_tokens` common words (about one token each in BPE
    vocabularies), and the count is marked unknown (None): the server's usage
    then reports the real one.
    """
    if count < 1:
        raise PromptError(f"a window needs at least one prompt, got count={count}")
    rng = np.random.default_rng(seed)
    ignore_eos = effective_ignore_eos(ignore_eos, shapes=True)
    tokenizer = _tokenizer(tokenizer_dir) if tokenizer_dir is not None else None
    prompts = []
    for i in range(count):
        if tokenizer is not None:
            text, n = _exact_text(tokenizer, shape.input_tokens, rng)
        else:
            text, n = " ".join(rng.choice(_WORDS, size=shape.input_tokens)), None
        prompts.append(
            Prompt(
                prompt_id=f"{shape.name}-{i}",
                messages=[ChatTurn(role="user", content=text)],
                text=text,
                input_tokens=n,
                max_output_tokens=shape.output_tokens,
                ignore_eos=ignore_eos,
            )
        )
    return prompts


def mixed_shape_prompts(shapes: list[ShapeSpec], count: int, *, tokenizer_dir: str | Path | None = None,
                        ignore_eos: bool | None = None) -> list[Prompt]:
    """`count` prompts over every shape in turn: prompt i is from shape i mod n, in the order given;
    `ignore_eos` as in `shaped_prompts`.

    Raises PromptError when `count` is below the number of shapes: a shape
    without a prompt would be listed but never measured."""
    if not shapes:
        raise PromptError("no workload shape to draw prompts from")
    if count < len(shapes):
        raise PromptError(f"{count} prompt(s) cannot cover {len(shapes)} workload shapes {[s.name for s in shapes]}: "
                          f"every listed shape is benched; raise matrix.load.num_prompts to {len(shapes)} or more")
    per_shape = [
        shaped_prompts(shape, share, tokenizer_dir=tokenizer_dir, seed=index, ignore_eos=ignore_eos)
        for index, (shape, share) in enumerate(zip(shapes, shape_shares(count, len(shapes)), strict=True))
    ]
    return [per_shape[i % len(shapes)][i // len(shapes)] for i in range(count)]


def shape_shares(count: int, n: int) -> list[int]:
    """Prompts per shape when `count` are taken in turn from `n` shapes: equal, the first shapes take the remainder."""
    return [count // n + (1 if i < count % n else 0) for i in range(n)]


def cycle(prompts: list[Prompt], count: int) -> list[Prompt]:
    """`count` prompts, reusing the list from its start when it is shorter (warm-up, long windows)."""
    if not prompts:
        raise PromptError("no prompts to send")
    return [prompts[i % len(prompts)] for i in range(count)]


# Common English words: a tokenizer-free stand-in for `input_tokens` tokens.
_WORDS = np.array(
    "the of and to in is that for it as was with be by on not he this are or his from at which but have an they "
    "you were her she there one all we their been has would when if more no out so said what up its about into "
    "than them can only other new some could time these two may then do first any my now such like our over man".split()
)


def _tokenizer(tokenizer_dir: str | Path):  # -> tokenizers.Tokenizer
    from tokenizers import Tokenizer

    path = Path(tokenizer_dir) / "tokenizer.json"
    if not path.is_file():
        raise PromptError(f"{path} does not exist; shaped prompts need the target's tokenizer folder (tokenizer.json)")
    try:
        return Tokenizer.from_file(str(path))
    except Exception as err:  # tokenizers raises a bare Exception on bad files
        raise PromptError(f"cannot load {path}: {err}; pass a tokenizer.json written by `tokenizers`") from err


def _exact_text(tokenizer, n_tokens: int, rng: np.random.Generator) -> tuple[str, int]:
    """Text that encodes to exactly n_tokens tokens (without special tokens), as far as the vocabulary allows.

    Only tokens that decode on their own to printable text are drawn: byte
    fragments of multi-byte characters would decode to U+FFFD and re-encode
    to other tokens. Decode -> encode can still merge neighbours, so the ids
    are re-encoded, trimmed or extended until the count is stable.
    """
    special = {t.content for t in tokenizer.get_added_tokens_decoder().values() if t.special}
    vocab = sorted(
        tid
        for tok, tid in tokenizer.get_vocab().items()
        if tok not in special
        and (piece := tokenizer.decode([tid])).strip()
        and piece.isprintable()
        and "\ufffd" not in piece
    )
    if not vocab:
        raise PromptError("the tokenizer has no printable ordinary tokens to build a prompt from")
    vocab_arr = np.array(vocab)
    ids = [int(i) for i in rng.choice(vocab_arr, size=n_tokens)]
    text = tokenizer.decode(ids)
    for _ in range(32):
        enc = tokenizer.encode(text, add_special_tokens=False).ids
        if len(enc) == n_tokens:
            return text, n_tokens
        if len(enc) > n_tokens:
            ids = enc[:n_tokens]
        else:
            ids = enc + [int(i) for i in rng.choice(vocab_arr, size=n_tokens - len(enc))]
        text = tokenizer.decode(ids)
    return text, len(tokenizer.encode(text, add_special_tokens=False).ids)


def _completion_renderer(tokenizer_dir: str | Path | None):
    template = None
    if tokenizer_dir is not None:
        template = load_chat_template(tokenizer_dir)

    def render(messages: Iterable[ChatTurn | ChatMessage]) -> str:
        turns = [{"role": m.role, "content": m.content} for m in messages]
        if template is not None:
            return template.render(turns, add_generation_prompt=True)
        return "\n\n".join(turn["content"] for turn in turns)

    return render


def _short(err: Exception) -> str:
    if isinstance(err, ValidationError):
        first = err.errors()[0]
        return f"{'.'.join(str(p) for p in first['loc'])}: {first['msg']}"
    return str(err)
