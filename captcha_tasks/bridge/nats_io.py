"""The NATS side of a bridge: the client library, the connection, and what a loop does
when NATS misbehaves. The job handling is :mod:`.nats_bridge`'s.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from types import ModuleType
from typing import TYPE_CHECKING, Any

from ..errors import ConfigurationError
from ..redaction import scrub_text

if TYPE_CHECKING:
    from nats.aio.client import Client

__all__ = ["CONNECT_TIMEOUT", "connect", "intake_trouble", "load_nats", "pause", "settle"]

log = logging.getLogger("captcha_tasks.bridge")

#: Seconds the first connection to NATS may take before the bridge gives up.
CONNECT_TIMEOUT = 15.0


def load_nats() -> ModuleType:
    """The ``nats`` package (nats-py), imported only when a bridge runs."""
    try:
        import nats
    except ImportError:
        raise ConfigurationError(
            "the NATS bridge needs the NATS client: pip install 'captcha_tasks[nats]'",
            "MISSING_EXTRA",
        ) from None
    return nats


async def connect(
    nats: ModuleType, servers: list[str], shown: str, stop: asyncio.Event
) -> Client | None:
    """Connect within :data:`CONNECT_TIMEOUT` (the client alone would retry forever);
    ``None`` when told to stop first. Once connected, the client reconnects by itself."""
    errors: list[str] = []

    async def note_error(exc: Exception) -> None:
        errors.append(scrub_text(str(exc)) or type(exc).__name__)
        await _log_nats_error(exc)

    connecting = asyncio.ensure_future(
        nats.connect(
            servers,
            name="captcha-tasks-bridge",
            connect_timeout=5,
            max_reconnect_attempts=-1,
            reconnect_time_wait=1,
            error_cb=note_error,
            disconnected_cb=_note(f"bridge: disconnected from {shown}"),
            reconnected_cb=_note(f"bridge: reconnected to {shown}"),
        )
    )
    stopping = asyncio.ensure_future(stop.wait())
    done, _ = await asyncio.wait(
        {connecting, stopping}, timeout=CONNECT_TIMEOUT, return_when=asyncio.FIRST_COMPLETED
    )
    stopping.cancel()
    if connecting not in done:
        connecting.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await connecting
        if stop.is_set():
            return None
        last = errors[-1] if errors else "no answer"
        raise ConfigurationError(
            f"cannot connect to NATS at {shown} within {CONNECT_TIMEOUT:.0f} s: {last}",
            "NATS_UNREACHABLE",
        )
    try:
        nc: Client = connecting.result()
    except Exception as exc:
        raise ConfigurationError(
            f"cannot connect to NATS at {shown}: {scrub_text(str(exc)) or type(exc).__name__}",
            "NATS_UNREACHABLE",
        ) from None
    return nc


async def pause(stop: asyncio.Event, seconds: float) -> None:
    with contextlib.suppress(asyncio.TimeoutError):
        await asyncio.wait_for(stop.wait(), seconds)


async def intake_trouble(nc: Client, stop: asyncio.Event, exc: Exception) -> None:
    """A failed receive: wait a second and try again, unless the connection is gone for good."""
    if nc.is_closed:
        raise exc
    log.warning("bridge: taking jobs failed: %s", scrub_text(str(exc)) or type(exc).__name__)
    await pause(stop, 1.0)


async def settle(ack: Any) -> None:
    """Send an ack or nak; a failure only means the message comes again (same task id)."""
    try:
        await ack
    except Exception as exc:
        log.warning("bridge: acknowledgement failed: %s", scrub_text(str(exc)))


async def _log_nats_error(exc: Exception) -> None:
    log.warning("bridge: NATS: %s", scrub_text(str(exc)) or type(exc).__name__)


def _note(text: str) -> Callable[[], Any]:
    async def callback() -> None:
        log.warning(text)

    return callback
