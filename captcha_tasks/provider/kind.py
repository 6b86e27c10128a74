"""The terms a captcha kind is declared in. Each class of :mod:`.captchas` is one kind's
whole declaration: its fields and their checks, its :class:`Timing`, and per provider its
:class:`Offer` (offered or not, the wire names a JSON dialect uses for it, and the public
source that says so). The engine's timings, the dialects' task names and the catalogue
(:mod:`.offers`) are read from those declarations, never written again.
"""

from __future__ import annotations

import base64
import dataclasses
from collections.abc import Mapping
from typing import Any, ClassVar, Literal, TypeVar

from ..errors import InvalidTaskInput
from ..settings.parsing import CaptchaType, Provider
from ._images import DEFAULT_MAX_IMAGE_BYTES, MAX_IMAGE_BYTES_CEILING

__all__ = [
    "Captcha",
    "CaptchaType",
    "Offer",
    "OfferState",
    "Offers",
    "Params",
    "Task",
    "TaskNames",
    "Timing",
    "classic",
    "image_params",
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


_C = TypeVar("_C", bound="Captcha")


#: A submit's form parameters as a kind gives them; None: an option left out.
Params = dict[str, str | None]


#: A createTask ``task``'s fields as a kind gives them; None: an option left out.
Task = dict[str, Any]


def image_params(body: bytes, multipart: bool) -> Params:
    """An image's in.php upload: inline as base64, or (``method=post``) a multipart file
    that :func:`~.classic_params.submit_files` adds."""
    if multipart:
        return {"method": "post"}
    return {"method": "base64", "body": base64.b64encode(body).decode("ascii")}


class Captcha:
    """Base of the captcha kinds: ``type``, its :class:`~.kind.Timing`, its
    :class:`~.kind.Offer` at each provider (``offers``), and ``validate()``."""

    __slots__ = ()
    type: ClassVar[CaptchaType]
    timing: ClassVar[Timing]
    offers: ClassVar[Offers]

    def __post_init__(self) -> None:
        self._check(MAX_IMAGE_BYTES_CEILING)

    def validate(self: _C, *, max_image_bytes: int = DEFAULT_MAX_IMAGE_BYTES) -> _C:
        """Check every field again (images against ``max_image_bytes``); returns ``self``."""
        if isinstance(max_image_bytes, bool) or not isinstance(max_image_bytes, int):
            raise TypeError("max_image_bytes must be an int")
        self._check(max_image_bytes)
        return self

    def _check(self, max_image_bytes: int) -> None:
        raise NotImplementedError

    def classic_params(self) -> Params:
        """in.php's parameters for this captcha: ``method`` and its fields (None: an unset
        option, left out). ``key``, ``json`` and the proxy are the client's to add."""
        raise InvalidTaskInput(f"in.php has no method for {type(self).__name__}")

    def json_fields(self, provider: Provider) -> Task:
        """The fields of a createTask's ``task`` for this captcha at JSON ``provider``
        (None: an unset option, left out), beside ``type`` and the proxy's, which
        :func:`~.json_tasks.task_for` adds (docs/PROVIDERS.md §3, §4)."""
        raise InvalidTaskInput(f"provider {provider}: no task for {type(self).__name__}")
