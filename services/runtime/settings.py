"""Service settings from the environment (prefix SPECDEC_). Nothing connects here."""

from __future__ import annotations

import os
import socket
from pathlib import Path

from pydantic import Field, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from services.runtime.secrets import Unreadable, from_file


def default_instance() -> str:
    return f"{socket.gethostname()}-{os.getpid()}"


class RuntimeSettings(BaseSettings):
    """What every specdec service reads from its environment.

    Every field has a consumer: services/runtime, and the publisher for the `publish_*` ones
    (docs/configuration.md, docs/publisher.md "Publishing"). Optional paths and names are strings
    whose empty value means unset, so the settings round-trip through `SPECDEC_*` variables.
    """

    model_config = SettingsConfigDict(env_prefix="SPECDEC_", extra="forbid")

    redis_url: str = Field(
        default="redis://127.0.0.1:6379/0",
        description="Redis URL; redis:// or rediss:// (TLS), with user:password@ when the server needs it: the "
        "services' ACL user, which may not write the approval stream (docs/deployment.md, \"Redis users\").",
    )
    redis_url_file: str = Field(
        default="",
        description="File holding the Redis URL (e.g. a mounted secret; surrounding whitespace is dropped), instead "
        "of redis_url (both set to different URLs is refused). Empty: redis_url as given.",
    )
    operator_redis_url: str = Field(
        default="",
        description="Redis URL of the operator's ACL user, the one allowed to write the approval stream; read only "
        "where a run is approved (`specdec approve`, the MCP approve tool). Empty: approvals go through redis_url.",
    )
    stream_prefix: str = Field(
        default="specdec", pattern=r"^[A-Za-z0-9][A-Za-z0-9_.:-]*$", description="Prefix of every stream and key."
    )
    bundle_root: Path = Field(default=Path("bundles"), description="Root folder of the evidence bundles.")
    instance: str = Field(default_factory=default_instance, description="Consumer name of this instance in its group.")
    max_deliveries: int = Field(default=5, ge=1, description="Deliveries after which a message is dead-lettered.")
    reclaim_idle_ms: int = Field(
        default=30_000, ge=100, description="Idle time after which another instance reclaims a pending message."
    )
    reclaim_poll_ms: int = Field(
        default=10_000, ge=10,
        description="How often an instance looks for reclaimable work: a dead instance's message is taken over "
        "between reclaim_idle_ms and reclaim_idle_ms + this after its last heartbeat.",
    )
    read_block_ms: int = Field(
        default=10_000, ge=1,
        description="XREADGROUP block time of an idle reader (an entry ends the wait at once; stopping cancels it).",
    )
    max_concurrency: int = Field(
        default=1, ge=1, le=256, description="Messages one instance handles at once (per stream it reads)."
    )
    shutdown_grace_s: float = Field(
        default=10.0, ge=0, description="On SIGTERM, how long in-flight work may finish before it is left pending."
    )
    stream_retention_s: float = Field(
        default=3600.0, ge=0,
        description="The journal trims a stream entry every group has acked once it is older than this (0: at once).",
    )
    log_level: str = Field(default="info", pattern=r"^(debug|info|warning|error)$", description="Log level.")
    health_port: int = Field(
        default=0, ge=0, le=65535,
        description="Port of this instance's /health and /metrics endpoint (docs/deployment.md); 0 turns it off.",
    )

    publish_token_env: str = Field(
        default="", pattern=r"^([A-Za-z_][A-Za-z0-9_]*)?$",
        description="Name of the environment variable holding the bearer token of https:// publish targets "
        "(the token itself is never a setting, never logged, never in the bundle); empty: no token from the "
        "environment.",
    )
    publish_token_file: str = Field(
        default="",
        description="File holding the bearer token of https:// publish targets (e.g. a mounted secret; surrounding "
        "whitespace is dropped); empty: no token file.",
    )
    publish_ca_bundle: str = Field(
        default="",
        description="PEM file of the CA certificates an https:// publish target is verified against, instead of the "
        "system's (SSL_CERT_FILE) or certifi's; empty: those. s3:// targets use the AWS chain's AWS_CA_BUNDLE.",
    )
    publish_allowed_targets: str = Field(
        default="",
        description="URL prefixes (https://HOST[:PORT][/PATH], separated by spaces or commas) of the https:// and "
        "http:// publish targets allowed, compared as parsed URLs (scheme, host, port, path on a segment boundary). "
        "Set: any other https:// or http:// target is refused before a connection is opened, with a token or "
        "without. Empty: with a bearer token configured, only the campaign's own publish.target; without one, any.",
    )

    @field_validator("publish_allowed_targets")
    @classmethod
    def _prefixes(cls, value: str) -> str:
        if value.strip():
            from services.runtime.url_prefix import parse_prefixes  # httpx, only when the setting is used

            parse_prefixes(value, "SPECDEC_PUBLISH_ALLOWED_TARGETS")
        return value

    @model_validator(mode="after")
    def _redis_url_from_file(self) -> RuntimeSettings:
        if not self.redis_url_file:
            return self
        try:
            url = from_file(self.redis_url_file)
        except Unreadable as exc:
            raise ValueError(f"SPECDEC_REDIS_URL_FILE {self.redis_url_file} cannot be read ({exc.reason}); "
                             "point it at the file holding the services' Redis URL") from None
        if not url:
            raise ValueError(f"SPECDEC_REDIS_URL_FILE {self.redis_url_file} is empty; it must hold a redis:// URL")
        if "redis_url" in self.model_fields_set and self.redis_url != url:
            raise ValueError("SPECDEC_REDIS_URL and SPECDEC_REDIS_URL_FILE are both set, to different URLs: the Redis "
                             "URL comes from one place; unset one of them")
        self.redis_url = url
        return self

    @model_validator(mode="after")
    def _one_token_source(self) -> RuntimeSettings:
        if self.publish_token_env and self.publish_token_file:
            raise ValueError(
                "SPECDEC_PUBLISH_TOKEN_ENV and SPECDEC_PUBLISH_TOKEN_FILE are both set: the publish token comes from "
                "one place; unset one of them"
            )
        return self

    @property
    def heartbeat_s(self) -> float:
        # The owner of a long step resets its message's idle time three times per
        # reclaim window, so a live step is never idle long enough to be stolen.
        return self.reclaim_idle_ms / 3000.0

    @property
    def lease_ttl_ms(self) -> int:
        # Shorter than the reclaim idle time: a dead owner's lease is gone before its
        # message can be reclaimed (services/runtime/delivery/ledger.py). A step's lease
        # and the bench's node lock (services/bench/node_lock.py) both last this long.
        return max(1, self.reclaim_idle_ms * 2 // 3)
