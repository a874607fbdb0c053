"""structlog JSON logs; every line carries service (and run_id, event_id when known)."""

from __future__ import annotations

import logging
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import structlog

class _Stderr:
    """Resolves sys.stderr at each write, so a replaced stderr (tests, daemons)
    never leaves loggers writing into a closed stream."""

    def write(self, text: str) -> int:
        return sys.stderr.write(text)

    def flush(self) -> None:
        sys.stderr.flush()


_LEVELS = {"debug": logging.DEBUG, "info": logging.INFO, "warning": logging.WARNING, "error": logging.ERROR}


def configure_stdlib(level: str = "info") -> int:
    """The standard library's logging alone (what faststream and httpx log through); the numeric level.

    For a command that never logs through structlog (`specdec status`, `watch`, `dlq list`):
    importing structlog (and the rich it finds installed) would cost it ~0.2 s of its start."""
    numeric = _LEVELS[level]
    logging.basicConfig(stream=sys.stderr, level=numeric, format="%(message)s", force=True)
    # faststream's own supervisor chatter; specdec logs each message itself.
    logging.getLogger("specdec.faststream").setLevel(max(numeric, logging.WARNING))
    # One line per HTTP request of the load generator would drown the service's own lines.
    logging.getLogger("httpx").setLevel(max(numeric, logging.WARNING))
    return numeric


def configure(service: str, level: str = "info") -> structlog.stdlib.BoundLogger:
    """Configure JSON logs on stderr for this process and return the service's logger."""
    import structlog

    numeric = configure_stdlib(level)
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.format_exc_info,
            structlog.processors.JSONRenderer(),
        ],
        wrapper_class=structlog.make_filtering_bound_logger(numeric),
        logger_factory=structlog.PrintLoggerFactory(file=_Stderr()),  # type: ignore[arg-type]  # write and flush only
        cache_logger_on_first_use=False,
    )
    logger: structlog.stdlib.BoundLogger = structlog.get_logger().bind(service=service)
    return logger


def get(service: str) -> structlog.stdlib.BoundLogger:
    import structlog

    logger: structlog.stdlib.BoundLogger = structlog.get_logger().bind(service=service)
    return logger
