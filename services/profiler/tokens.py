"""Token counts of one record side: from the line's count fields, a local tokenizer, or an estimate.

Order of precedence, per side (input and output independently):

1. the count the line carries (`usage.prompt_tokens` / `input_tokens`, ...): the
   serving engine's own count, exact for the model that served it;
2. a local Hugging Face tokenizer folder (`DIR/tokenizer.json`, loaded with the
   `tokenizers` library): the text's length in that tokenizer, special tokens
   and chat template excluded (templates differ per model; the corpus step's
   render check measures the templated length);
3. the documented estimate `estimate_tokens` below.

The profile reports, per side, how many records took each source.
"""

from __future__ import annotations

import math
import re
from pathlib import Path

from services.profiler.errors import TokenizerError

ESTIMATE_METHOD = (
    "ceil(ascii_chars / 4 + cjk_chars + other_non_ascii_chars / 2), at least 1 for non-empty text: "
    "about 4 characters a token for English-like text under BPE vocabularies, about one token a "
    "CJK/kana/hangul character, about two characters a token for other scripts"
)

# CJK unified ideographs (+ext A), kana, hangul syllables, CJK punctuation, full-width forms.
_CJK = re.compile(r"[\u3000-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uff00-\uffef]")


def estimate_tokens(text: str) -> int:
    """Estimate the token count of `text` (see ESTIMATE_METHOD). Pure, deterministic."""
    if not text:
        return 0
    if text.isascii():
        return max(1, math.ceil(len(text) / 4))
    ascii_chars = len(text.encode("ascii", "ignore"))
    non_ascii = len(text) - ascii_chars
    cjk = len(_CJK.findall(text))
    return max(1, math.ceil(ascii_chars / 4 + cjk + (non_ascii - cjk) / 2))


class TokenizerCounter:
    """Counts tokens with a local Hugging Face tokenizer folder (no hub access)."""

    def __init__(self, directory: str | Path) -> None:
        self.directory = Path(directory)
        path = self.directory / "tokenizer.json"
        if not path.is_file():
            raise TokenizerError(
                f"no tokenizer.json in {self.directory}: pass --tokenizer a local Hugging Face tokenizer "
                "folder (the one saved with the model), or leave it out to use the line counts or the estimate"
            )
        from tokenizers import Tokenizer  # imported here: only needed when a folder is given

        try:
            self._tokenizer = Tokenizer.from_file(str(path))
        except Exception as exc:  # the Rust side raises plain Exception subclasses
            raise TokenizerError(f"cannot load {path}: {exc}; check the file is a `tokenizers` JSON") from exc

    def count(self, text: str) -> int:
        if not text:
            return 0
        return len(self._tokenizer.encode(text, add_special_tokens=False).ids)


class SideSources:
    """How many records took each count source for one side (input or output).

    `from_fields` is not tallied per record (the hot path skips the counter when
    the line carries its count): it is the rest, accepted - the other sources.
    """

    __slots__ = ("from_tokenizer", "estimated", "missing")

    def __init__(self) -> None:
        self.from_tokenizer = 0
        self.estimated = 0
        self.missing = 0

    def from_fields(self, accepted: int) -> int:
        return accepted - self.from_tokenizer - self.estimated - self.missing


class TokenCounter:
    """Resolves one side's count when the line carried none, and tallies the sources used."""

    def __init__(self, tokenizer: TokenizerCounter | None) -> None:
        self.tokenizer = tokenizer
        self.input = SideSources()
        self.output = SideSources()
        self.estimated_records = 0  # records with at least one side estimated

    def resolve(self, text: str | None, side: SideSources) -> tuple[int | None, bool]:
        """(count, estimated?) for a side without a count; count is None when there is no text either."""
        if text is None:
            side.missing += 1
            return None, False
        if self.tokenizer is not None:
            side.from_tokenizer += 1
            return self.tokenizer.count(text), False
        side.estimated += 1
        return estimate_tokens(text), True
