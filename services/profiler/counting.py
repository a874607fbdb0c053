"""Tallies of where the profile's token counts came from, per side.

Each accepted record takes one source per side (the precedence is in
`services.shared.text.tokens`): the line's count, the tokenizer folder, the
estimate, or none (no text either). The profile's `token_counting` section
reports these tallies.
"""

from __future__ import annotations

from services.shared.text.tokens import TokenizerCounter, estimate_tokens


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
