"""An approval goes onto the approval stream through the operator's Redis user.

Redis's ACL lets only the operator's user XADD `<prefix>.run.approved` (infra/bin/redis-credentials,
docs/deployment.md "Redis users"): the services' user, which every service and workload runs with,
gets NOPERM. The event names who approved: the operator as the CLI sees them, and the Redis user
that published it (ACL WHOAMI on the publishing connection; never its password)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from services.app.context import Session, approver_settings, operator
from services.runtime.errors import ConfigurationError

if TYPE_CHECKING:
    import redis.asyncio as aioredis

    from contracts.events import RunApproved


async def redis_user(client: aioredis.Redis) -> str | None:
    """The connection's Redis ACL user; None where the server has no ACL (Redis before 6)."""
    from redis.exceptions import ResponseError

    try:
        user = await client.acl_whoami()
    except ResponseError:
        return None
    return user.decode() if isinstance(user, bytes) else str(user)


async def publish_approval(session: Session, run_id: str, plan_sha256s: list[str]) -> RunApproved:
    """Publish run.approved for the plans, with the operator's Redis user where one is configured."""
    import redis.asyncio as aioredis
    from redis.exceptions import NoPermissionError

    from contracts.events import RunApproved
    from contracts.streams import stream_name
    from services.runtime.delivery.broker import Bus, make_broker

    settings = approver_settings(session.settings)
    own = settings is not session.settings
    client = aioredis.Redis.from_url(settings.redis_url) if own else session.client
    broker = make_broker(settings) if own else None
    try:
        user = await redis_user(client)
        event = RunApproved(
            run_id=run_id,
            producer=f"cli/{operator()}",
            i_understand_this_mutates_cluster=True,
            plan_sha256s=plan_sha256s,
            approved_by=f"{operator()} (Redis user {user})" if user else operator(),
        )
        bus = session.bus
        if broker is not None:
            await broker.connect()
            bus = Bus(broker, settings.stream_prefix)
        try:
            await bus.publish(event)
        except NoPermissionError:
            stream = stream_name(settings.stream_prefix, RunApproved.SCHEMA)
            raise ConfigurationError(
                f"Redis user {user or 'default'} may not write the approval stream {stream} (NOPERM): approving "
                "takes the operator's Redis user; set SPECDEC_OPERATOR_REDIS_URL to its URL "
                "(`infra/bin/ensure-redis --operator` prints it for the local Redis)"
            ) from None
    finally:
        if broker is not None:
            await broker.stop()
        if own:
            await client.aclose()
    return event
