"""The environment a workload starts with: what the platform needs, what the executor sets, and the
variables the campaign declares for it. Nothing else of the service's environment passes.

A workload is any process specdec starts for a campaign: the trainer and its probe, a vLLM server,
the operator's bench and eval commands, specdec's own load generator, and the idle check. The
service that starts it holds specdec's credentials (SPECDEC_REDIS_URL with its password, the
variable a *_TOKEN_ENV setting names, AWS keys for the lake); a workload is the operator's code
and needs none of them, so it never sees them unless the campaign declares them by name.

What passes (docs/configuration.md, "The workload's environment", gives the list and the reasons):

- the platform: `PLATFORM` by name (the search path, home, user, locale, time zone, temporary
  folder, the Python and CA settings, Hugging Face's cache and offline switches) and `PLATFORM_PREFIXES`
  by prefix (locale categories, the CUDA/NCCL/ROCm device and library settings, the thread-count and
  tuning knobs of OpenMP, MKL, torch, Triton and vLLM, Slurm's own variables), except a name that
  reads like a credential (`_SECRET_NAME`: VLLM_API_KEY, NCCL_..._TOKEN), which passes only when
  declared;
- the variables the campaign declares for the command (`env: [HF_TOKEN]`), with their values from
  the service's environment at launch; the names are in the reviewed plan, the values never are;
- what the caller sets on top (`extra`: the engine defaults) and what `procs.spawn` adds (the
  experiment label).

A declared name the service's environment lacks at launch fails the launch, naming the variable
(`MissingVariable`, a `StepFailed`): the workload would otherwise start without a credential it
was declared to need and fail later, further from the cause.
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
