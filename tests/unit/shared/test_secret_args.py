"""The one masking rule for secret-bearing arguments, and the workload environment's platform list (pure logic)."""

from __future__ import annotations

from typing import Any

import pytest

from services.runtime.processes.workload_env import MissingVariable, environment, is_platform
from services.shared.secret_args import MASK, mask_argv, mask_document, mask_text


def test_secret_flags_are_masked_by_their_words_and_lookalikes_are_not() -> None:
    argv = ["vllm", "serve", "m", "--hf-token", "hf_x1", "--api-key=k2", "--token", "t3", "--db-password", "p4",
            "--max-tokens", "128", "--tokenizer", "/tok", "--num-speculative-tokens", "3", "--token-budget", "1024",
            "--port", "{port}"]
    assert mask_argv(argv) == ["vllm", "serve", "m", "--hf-token", MASK, f"--api-key={MASK}", "--token", MASK,
                               "--db-password", MASK, "--max-tokens", "128", "--tokenizer", "/tok",
                               "--num-speculative-tokens", "3", "--token-budget", "1024", "--port", "{port}"]
    assert mask_argv(["x", "--token", "--port", "1"]) == ["x", "--token", "--port", "1"]  # no value to mask


def test_detected_secrets_are_masked_wherever_they_stand() -> None:
    assert mask_argv(["--db", "postgres://u:pw1234@db/app"]) == ["--db", "postgres://<SECRET:url_credentials>@db/app"]
    assert "pw1234" not in mask_text("connect with postgres://u:pw1234@db/app now")
    assert mask_argv(["--host", "10.1.2.3"]) == ["--host", "10.1.2.3"]  # personal-data kinds are left alone


def test_documents_texts_and_logs_are_masked() -> None:
    doc: dict[str, Any] = {
        "cells": [{"serve_argv": ["vllm", "--hf-token", "hf_a"]}],
        "engine_args": {"hf_token": "hf_b", "dtype": "auto"},
        "job_script": "ARGV = ['train.py', '--api-key', 'sk-c']",
    }
    masked = mask_document(doc)
    assert "hf_a" not in str(masked) and "hf_b" not in str(masked) and "sk-c" not in str(masked)
    assert masked["engine_args"]["dtype"] == "auto" and doc["cells"][0]["serve_argv"][2] == "hf_a"  # a copy
    assert "hf_d" not in mask_text("non-default args: {'model': 'm', 'hf_token': 'hf_d'}")
    assert "sk-e" not in mask_text("argv:\n  - --api-key\n  - sk-e\n")


def test_the_platform_passes_and_credentials_need_a_declaration() -> None:
    service = {"PATH": "/bin", "LANG": "C.UTF-8", "CUDA_VISIBLE_DEVICES": "0", "VLLM_CPU_KVCACHE_SPACE": "2",
               "VLLM_API_KEY": "k", "HF_TOKEN": "h", "SPECDEC_REDIS_URL": "redis://:pw@x", "AWS_SECRET_ACCESS_KEY": "a",
               "LAKE": "l", "SPECDEC_PUBLISH_TOKEN_ENV": "LAKE"}
    assert environment(environ=service) == {"PATH": "/bin", "LANG": "C.UTF-8", "CUDA_VISIBLE_DEVICES": "0",
                                            "VLLM_CPU_KVCACHE_SPACE": "2"}
    assert environment(["HF_TOKEN"], environ=service, extra={"X": "1"})["HF_TOKEN"] == "h"
    assert not is_platform("VLLM_API_KEY") and not is_platform("NCCL_AUTH_TOKEN") and is_platform("OMP_NUM_THREADS")
    with pytest.raises(MissingVariable, match="commands.train.env declares env GATED_TOKEN"):
        environment(["GATED_TOKEN"], where="commands.train.env", environ=service)
