"""Tokens of an operator's exact command, as the canonical shape reads them (docs/configuration.md).

Only whitelisted `{name}`s are placeholders; every other brace is literal. `literal` turns a
token into an argv-template token; `sample` gives vLLM's parsers a value of the right type
for each placeholder before launch (the launch renders the real one).
"""

from __future__ import annotations

import re

from contracts.argv import PLACEHOLDERS

# A value of each placeholder's type while vLLM's parser reads a command. `{training.output}` is kept
# as written: the speculative config names the trained draft with it.
SAMPLES = {"host": "127.0.0.1", "port": "8000", "base_url": "http://127.0.0.1:8000", "concurrency": "1",
           "max_model_len": "2048", "tensor_parallel_size": "1", "max_num_seqs": "1", "num_prompts": "1",
           "warmup_requests": "0", "request_rate": "inf", "burstiness": "1.0", "max_output_tokens": "1",
           "result_dir": "/tmp", "result_filename": "result.json"}
PLACEHOLDER = re.compile(r"\{([^{}]*)\}")


def literal(token: str) -> str:
    """A canonical token as an argv template: a whitelisted `{name}` stays a placeholder, every other brace
    is literal (so `--speculative-config '{"method": "ngram"}'` is kept as written)."""
    out, last = [], 0
    for match in PLACEHOLDER.finditer(token):
        if match.group(1) not in PLACEHOLDERS:
            continue
        out.append(_escape(token[last:match.start()]))
        out.append(match.group(0))
        last = match.end()
    out.append(_escape(token[last:]))
    return "".join(out)


def sample(token: str) -> str:
    """A token as vLLM's parser reads it before launch: each whitelisted placeholder but the trained draft
    stands for a value of its type."""
    def fill(match: re.Match[str]) -> str:
        return SAMPLES.get(match.group(1), match.group(0)) if match.group(1) in PLACEHOLDERS else match.group(0)

    return PLACEHOLDER.sub(fill, token)


def _escape(text: str) -> str:
    return text.replace("{", "{{").replace("}", "}}")
