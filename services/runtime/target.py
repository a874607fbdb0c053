"""Facts about the campaign's target that several services read from disk."""

from __future__ import annotations

from pathlib import Path

from contracts.campaign import Campaign


def tokenizer_folder(campaign: Campaign) -> str | None:
    """The target's tokenizer folder when it holds a tokenizer.json, else None:
    the services then use their documented fallback (estimated token counts,
    no render check, untokenized prompts) and say so in what they write."""
    folder = Path(campaign.target.tokenizer_dir)
    return str(folder) if (folder / "tokenizer.json").is_file() else None
