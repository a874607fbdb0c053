"""Running an approved plan: launching the trainer, watching it, capturing everything.

`execute.py` (the approval's use case: preflight, launch, watch, capture,
cleanup, the verdict), `local.py` and `slurm.py` (the executors), `monitor.py`
(what an executor reports, the watch over the output files), `loss.py`
(non-finite loss detection, pure) and `capture.py` (the run into the bundle,
write-once and hashed).
"""
