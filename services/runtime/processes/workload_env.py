"""The environment a workload starts with: the platform's variables, what the executor sets, and what the
campaign declares. Nothing else of the service's environment passes.

A workload is the operator's code and needs none of the service's credentials, so it never sees them
unless the campaign declares them by name; a declared name missing at launch fails the launch
(`MissingVariable`). The list and the reasons: docs/configuration.md#the-workloads-environment-env.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence

from services.runtime.errors import StepFailed

PLATFORM: frozenset[str] = frozenset({
    # The process's basics: where programs are, whose they are, where they write, how text is read.
    "PATH", "HOME", "USER", "LOGNAME", "SHELL", "LANG", "LANGUAGE", "TZ", "TMPDIR", "TERM", "HOSTNAME",
    # Where shared libraries come from; vLLM's CPU backend wants tcmalloc/OpenMP preloaded for its speed.
    "LD_LIBRARY_PATH", "LD_PRELOAD", "CC", "CXX",
    # Python: the interpreter's own switches and the environment an operator's argv[0] may rely on.
    "PYTHONPATH", "PYTHONHASHSEED", "PYTHONUNBUFFERED", "PYTHONDONTWRITEBYTECODE", "PYTHONIOENCODING", "VIRTUAL_ENV",
    # Which CA certificates TLS clients trust (paths, not secrets).
    "SSL_CERT_FILE", "SSL_CERT_DIR", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE",
    # Hugging Face and transformers: cache folders and offline switches (HF_TOKEN is a credential: declare it).
    "HF_HOME", "HF_HUB_CACHE", "HF_DATASETS_CACHE", "HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "HF_HUB_DISABLE_TELEMETRY",
    "TRANSFORMERS_OFFLINE", "TRANSFORMERS_CACHE", "TOKENIZERS_PARALLELISM", "HF_ENDPOINT", "HF_HUB_ENABLE_HF_TRANSFER",
})
PLATFORM_PREFIXES: tuple[str, ...] = (
    "LC_", "XDG_",
    "CUDA_", "NVIDIA_", "NCCL_", "ROCR_", "HIP_",
    "OMP_", "MKL_", "KMP_", "OPENBLAS_", "TORCH_", "PYTORCH_", "TORCHINDUCTOR_", "TRITON_", "VLLM_",
    "SLURM_",
)
# A platform name that reads like a credential passes only when declared.
_SECRET_NAME = re.compile(r"TOKEN|SECRET|PASSW|API_?KEY|ACCESS_KEY|PRIVATE|CREDENTIAL|AUTH", re.IGNORECASE)


class MissingVariable(StepFailed):
    """A variable the campaign declares for a command is not set in the service's environment at launch."""


def is_platform(name: str) -> bool:
    """Whether `name` passes to every workload without a declaration."""
    if _SECRET_NAME.search(name):
        return False
    return name in PLATFORM or name.startswith(PLATFORM_PREFIXES)


def environment(
    declared: Sequence[str] = (),
    *,
    where: str = "",
    extra: Mapping[str, str] | None = None,
    environ: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """The whole environment of a workload: the platform's variables of `environ` (this process's
    when None), the `declared` ones (MissingVariable, naming `where`, when one is unset), then `extra`."""
    source = os.environ if environ is None else environ
    missing = [name for name in declared if name not in source]
    if missing:
        names = ", ".join(missing)
        raise MissingVariable(
            f"{where or 'the command'} declares env {names}, which is not set in the environment of the service that "
            f"launches it: set {names} where the specdec services start (values are read there at launch and never "
            f"written to the bundle), or remove it from {where or 'the declaration'}"
        )
    env = {name: value for name, value in source.items() if is_platform(name)}
    env.update({name: source[name] for name in declared})
    env.update(extra or {})
    return env
