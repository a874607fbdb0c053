"""Code two or more steps share, below the steps and above the runtime.

A step never imports another step (`.importlinter`); what two steps need
alike lives here: scheduler adapters (`scheduler`), text utilities (`text`),
and the idle-node check the capacity step runs and the trainer-proxy and the
bench-runner repeat before they launch (`capacity`). Nothing here imports a
step, and nothing connects at import time.
"""
