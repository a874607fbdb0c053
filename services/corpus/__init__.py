"""Corpus service: turns a traffic profile and its traffic into the matched,
redacted, deduplicated training/held-out corpus (see docs/corpus.md)."""
