"""The terms a captcha kind is declared in. Each class of :mod:`.captchas` is one kind's
whole declaration: its fields and their checks, its :class:`Timing`, and per provider its
:class:`Offer` (offered or not, the wire names a JSON dialect uses for it, and the public
source that says so). The engine's timings, the dialects' task names and the catalogue
(:mod:`.offers`) are read from those declarations, never written again.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Literal

from ..settings.parsing import Provider

__all__ = [
    "Offer",
    "OfferState",
    "Offers",
    "TaskNames",
    "Timing",
    "classic",
    "not_offered",
    "task",
    "withdrawn",
]


@dataclasses.dataclass(frozen=True)
class Timing:
    """When a kind's answers come and how long they serve, in production seconds
    (``CAPTCHA_TASKS_TIME_SCALE`` scales them): the wait before its ``first_poll`` until
    enough solves were seen to learn it (the providers' documented first reads), the
    ``deadline`` from submit after which it is given up (``SolveTimeout``), how long its
    token stays valid at the site (``token_ttl``; None: no source says), and the longest
    a solve takes at the provider (``drain_ceiling``: what a rolling update's
    ``--drain-timeout auto`` waits before any solve of it was seen)."""

    first_poll: float
    deadline: float
    drain_ceiling: float
    token_ttl: float | None = None


@dataclasses.dataclass(frozen=True)
class TaskNames:
    """A kind's task ``type`` names at a JSON provider; ``None``: not offered that way."""

    proxyless: str | None
    proxy: str | None


OfferState = Literal["offered", "not offered", "withdrawn"]


@dataclasses.dataclass(frozen=True)
class Offer:
    """Whether one provider solves a kind (``state``), who says so (``source``; None: the
    provider's own docs, :data:`~.offers.PROVIDER_SOURCES`), and at a JSON provider the
    task names it takes (``names``; a withdrawn kind keeps the names a stale catalogue
    would still send, refused before anything is sent)."""

    state: OfferState
    source: str | None = None
    names: TaskNames | None = None


#: A kind's offer at each provider (one entry per provider of ``PROVIDERS``).
Offers = Mapping[Provider, Offer]


def classic(source: str | None = None) -> Offer:
    """Offered by a classic (``in.php``) provider."""
    return Offer("offered", source)


def task(proxyless: str | None, proxy: str | None, *, source: str | None = None) -> Offer:
    """Offered by a JSON provider under these task names (``None``: not that way)."""
    return Offer("offered", source, TaskNames(proxyless, proxy))


def not_offered(source: str | None = None) -> Offer:
    """Not solved by the provider."""
    return Offer("not offered", source)


def withdrawn(source: str, *, names: TaskNames | None = None) -> Offer:
    """Withdrawn by the provider, as ``source`` says."""
    return Offer("withdrawn", source, names)
