"""Token counts of one record side: from the line's count fields, a local tokenizer, or an estimate.

The profiler and the corpus step follow one order of precedence per side (docs/profiler.md#token-counts),
so a record's counts are the same in the profile and in the corpus.
"""

from __future__ import annotations

import math
import re
from pathlib import Path

from services.shared.text.errors import TokenizerError

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
