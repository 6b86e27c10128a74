"""Each captcha class is its kind's whole declaration: a Timing and an Offer for every
provider, in the shape its protocol needs; the engine's timings, the dialects' task
names and the catalogue are read from them."""

from __future__ import annotations

import pytest

from captcha_tasks.engine.timing import DEADLINE, FIRST_POLL, TOKEN_TTL
from captcha_tasks.fleet.plan import DRAIN_CEILINGS
from captcha_tasks.provider import CAPTCHA_CLASSES
from captcha_tasks.provider.json_dialects import dialect_for
from captcha_tasks.provider.offers import CLASSIC_OFFERS, SOURCES, WITHDRAWN, catalogue
from captcha_tasks.settings.parsing import PROTOCOLS, PROVIDERS


@pytest.mark.parametrize("kind", sorted(CAPTCHA_CLASSES))
def test_a_kind_declares_an_offer_at_every_provider_in_its_protocols_shape(kind: str) -> None:
    offers = CAPTCHA_CLASSES[kind].offers  # type: ignore[index]
    assert set(offers) == set(PROVIDERS)
    for provider, offer in offers.items():
        if offer.state == "withdrawn":
            assert offer.source, (kind, provider)  # a withdrawal always cites its source
        elif PROTOCOLS[provider] == "classic" or offer.state == "not offered":
            assert offer.names is None, (kind, provider)
        else:  # offered at a JSON provider: under some task name
            assert offer.names is not None, (kind, provider)
            assert offer.names.proxyless or offer.names.proxy, (kind, provider)


@pytest.mark.parametrize("kind", sorted(CAPTCHA_CLASSES))
def test_the_tables_are_read_from_the_declaration(kind: str) -> None:
    cls = CAPTCHA_CLASSES[kind]  # type: ignore[index]
    timing = cls.timing
    assert (FIRST_POLL[kind], DEADLINE[kind], DRAIN_CEILINGS[kind]) == (
        timing.first_poll,
        timing.deadline,
        timing.drain_ceiling,
    )
    assert TOKEN_TTL.get(kind) == timing.token_ttl
    assert 0 < timing.first_poll < timing.deadline and timing.drain_ceiling < timing.deadline
    cells = catalogue()
    for provider, offer in cls.offers.items():
        cell = cells[provider][kind]
        assert cell.state == offer.state, (kind, provider)
        if offer.state == "withdrawn":
            assert WITHDRAWN[provider][kind] == offer.source == cell.source
        else:
            assert cell.source == (offer.source or SOURCES[provider]["*"])
        if PROTOCOLS[provider] == "json":
            assert dialect_for(provider).task_types.get(kind) == offer.names
        else:
            assert (kind in CLASSIC_OFFERS[provider]) == (offer.state != "not offered")
