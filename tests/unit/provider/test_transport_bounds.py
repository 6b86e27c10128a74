"""A provider's answer is read within its call's deadline (the connect timeout plus the
read timeout) however it arrives: a provider that sends its head and then drips its
body, each byte inside the read timeout, is given up at the deadline, not a read
timeout past it."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from captcha_tasks.provider.transport import Connections, RequestFailed, post
from tests.support.heavy_site import HeavySite

#: The call's read timeout; its deadline is twice that (a loopback connect is
#: at once, but the connect timeout counts: min(5, timeout) + timeout).
TIMEOUT = 1.5


@pytest.fixture
def site() -> Iterator[HeavySite]:
    # A byte every 0.3 of the read timeout (each read in time, with room for a loaded
    # machine's scheduling) up to 0.1 of it before the deadline, then nothing: a read
    # that waits a read timeout from its last byte ends well past the deadline.
    deadline = 2 * TIMEOUT
    drip = HeavySite(drip_every=0.3 * TIMEOUT, drip_for=20.0, fade_after=deadline - 0.1 * TIMEOUT)
    with drip as heavy:
        yield heavy


def _post(site: HeavySite, path: str) -> float:
    connections = Connections()
    started = time.monotonic()
    try:
        with pytest.raises(RequestFailed) as raised:
            post(connections, f"{site.url}{path}", {"key": "k"}, {}, timeout=TIMEOUT, what="a read")
    finally:
        connections.close()
    assert raised.value.maybe_sent  # its head came: the provider had the request
    return time.monotonic() - started


def test_an_answer_dripping_past_the_deadline_is_given_up_at_the_deadline(
    site: HeavySite,
) -> None:
    took = _post(site, "/drip")
    deadline = 2 * TIMEOUT
    # At the deadline: not a read timeout after its last byte (0.7-0.8 of one later).
    assert deadline - 0.05 <= took < deadline + 0.5 * TIMEOUT
    assert site.sent["drip"] >= 5  # it was sending all along: each read was in time


def test_an_answer_that_stops_is_given_up_at_the_read_timeout(site: HeavySite) -> None:
    took = _post(site, "/silent")
    assert TIMEOUT - 0.05 <= took < 2 * TIMEOUT
