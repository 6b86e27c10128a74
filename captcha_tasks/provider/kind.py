"""The terms a captcha kind is declared in. Each class of :mod:`.captchas` is one kind's
whole declaration: its fields and their checks, its :class:`Timing`, per provider its
:class:`Offer` (offered or not, the wire names a JSON dialect uses for it, and the public
source that says so), and its :class:`SolveCall` (the solve task callers send). The
engine's timings, the dialects' task names, the catalogue (:mod:`.offers`) and the solve
tasks with their ``aio`` twins (generated from :func:`parameters`) are read from those
declarations, never written again.
"""

from __future__ import annotations

import base64
import dataclasses
from collections.abc import Mapping
from typing import Any, ClassVar, Literal, TypeVar

from ..errors import InvalidTaskInput
from ..settings.parsing import CaptchaType, Provider
from ._images import DEFAULT_MAX_IMAGE_BYTES, MAX_IMAGE_BYTES_CEILING, decode_base64

__all__ = [
    "BASE64_IMAGE",
    "NOT_A_PARAMETER",
    "REQUIRED",
    "AnswerContext",
    "Captcha",
    "CaptchaType",
    "Offer",
    "OfferState",
    "Offers",
    "Parameter",
    "Params",
    "ProxyUse",
    "Solution",
    "SolutionShape",
    "SolveCall",
    "Task",
    "TaskNames",
    "Timing",
    "build",
    "classic",
    "image_params",
    "in_php",
    "not_offered",
    "parameters",
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


#: How a kind's solve task takes a proxy of the pool (``proxy_id``): not at all, as an
#: option, or always (the task refuses a call without one, ``PROXY_REQUIRED``).
ProxyUse = Literal["none", "optional", "required"]


@dataclasses.dataclass(frozen=True)
class SolutionShape:
    """A kind's own ``solution`` type, a ``TypedDict`` that ``make generate`` writes into
    :mod:`captcha_tasks.results` with its ``SolveResult[...]`` alias (named by the
    :class:`SolveCall`'s ``result``): its ``name``, its docstring and its fields (name,
    annotation as source text)."""

    name: str
    doc: str
    fields: tuple[tuple[str, str], ...]


@dataclasses.dataclass(frozen=True)
class SolveCall:
    """A kind's solve task (``solve_<type>``), as callers see it: its docstring (``doc``),
    the TypedDict of :mod:`captcha_tasks.results` it returns (``result``, by name), how it
    takes a pool proxy (``proxy``; ``proxy_why``: why it needs one, where it does). Its
    parameters are the kind's fields (:func:`parameters`)."""

    doc: str
    result: str = "TokenResult"
    proxy: ProxyUse = "optional"
    proxy_why: str = ""
    #: The kind's own solution type, generated into :mod:`captcha_tasks.results`; None:
    #: ``result`` is a type written there by hand (a token's, or a family's).
    solution: SolutionShape | None = None
    #: The in.php ``method`` a NATS job names this kind by (:mod:`captcha_tasks.bridge`),
    #: where that method means this kind alone; None: no method, or one shared with
    #: other kinds (the bridge tells them apart by the job's flags).
    in_php: str | None = None


#: Field metadata: a field that is no parameter of the solve task (another builder sets it).
NOT_A_PARAMETER: Mapping[str, Any] = {"parameter": None}
#: Field metadata: an image the solve task takes as base64 text, ``image_b64`` (in.php's
#: ``body``).
BASE64_IMAGE: Mapping[str, Any] = {"parameter": "image_b64", "in_php": ("body",)}


def in_php(*names: str) -> Mapping[str, Any]:
    """Field metadata: the names in.php (and so a NATS job) gives the field, the one its
    parameter is called by also taken; the first is in.php's own."""
    return {"in_php": names}


#: A parameter without a default (the caller gives it).
REQUIRED: Any = dataclasses.MISSING


@dataclasses.dataclass(frozen=True)
class Parameter:
    """One parameter of a kind's solve task: its ``name``, its type as source text
    (``annotation``), its ``default`` (:data:`REQUIRED`: positional, given by every
    caller; else keyword-only), and the kind's ``field`` it fills (None: the route's own:
    ``proxy_id``, ``provider``, ``exclude``)."""

    name: str
    annotation: str
    default: Any = REQUIRED
    field: str | None = None
    #: The other names in.php gives it (:func:`in_php`).
    in_php: tuple[str, ...] = ()

    @property
    def required(self) -> bool:
        return self.default is REQUIRED


#: :func:`parameters` of each kind, read once.
_PARAMETERS: dict[type[Captcha], tuple[Parameter, ...]] = {}


def parameters(kind: type[Captcha]) -> tuple[Parameter, ...]:
    """The parameters of ``kind``'s solve task, less ``self``, in order: the fields
    without a default (positional), ``proxy_id`` where the proxy is required, the fields
    with one (keyword-only), ``proxy_id`` where it is optional, then ``provider`` and
    ``exclude``. A field marked :data:`BASE64_IMAGE` is taken as base64 text. Read once
    per kind: every call of its task builds its captcha from them (:func:`build`)."""
    found = _PARAMETERS.get(kind)
    if found is None:
        found = _PARAMETERS[kind] = _read_parameters(kind)
    return found


def _read_parameters(kind: type[Captcha]) -> tuple[Parameter, ...]:
    call = kind.solve_call
    if call is None:
        raise TypeError(f"{kind.__name__} declares no solve task")
    required: list[Parameter] = []
    options: list[Parameter] = []
    for field in dataclasses.fields(kind):  # type: ignore[arg-type]
        name = field.metadata.get("parameter", field.name)
        if not field.init or name is None:
            continue
        annotation = "str" if name != field.name else str(field.type)
        default = REQUIRED if field.default is dataclasses.MISSING else field.default
        param = Parameter(name, annotation, default, field.name, field.metadata.get("in_php", ()))
        (required if param.required else options).append(param)
    proxy = [Parameter("proxy_id", "str | None", None)] if call.proxy != "none" else []
    route = [
        Parameter("provider", "str | None", None),
        Parameter("exclude", "Sequence[str]", ()),
    ]
    if call.proxy == "required":
        return (*required, *proxy, *options, *route)
    return (*required, *options, *proxy, *route)


def build(kind: type[_C], values: Mapping[str, Any], *, max_image_bytes: int) -> _C:
    """``kind`` from a solve task's arguments (``values``, by parameter name; those not
    given keep the field's default), its image decoded from base64 text, refused before
    decoding over ``max_image_bytes``. Raises ``TypeError`` for an argument of the wrong
    type, :class:`InvalidTaskInput` for a value its checks refuse."""
    fields: dict[str, Any] = {}
    for param in parameters(kind):
        if param.field is None or param.name not in values:
            continue
        value = values[param.name]
        if param.name != param.field:  # the image, as base64 text
            if not isinstance(value, str):
                raise TypeError(f"{param.name} must be a base64 string")
            value = decode_base64(f"{kind.__name__}.{param.field}", value, max_image_bytes)
        fields[param.field] = value
    return kind(**fields)


#: A submit's form parameters as a kind gives them; None: an option left out.
Params = dict[str, str | None]


#: A createTask ``task``'s fields as a kind gives them; None: an option left out.
Task = dict[str, Any]

#: What a solve's ``solution`` is: a token or text, a dict, or a list of points.
Solution = str | dict[str, Any] | list[dict[str, int]]


@dataclasses.dataclass(frozen=True)
class AnswerContext:
    """What a job adds to its answer when the kind shapes it: a grid's (rows, cols), the
    user agent a cookie is bound to."""

    grid: tuple[int, int] | None = None
    user_agent: str | None = None


def image_params(body: bytes, multipart: bool) -> Params:
    """An image's in.php upload: inline as base64, or (``method=post``) a multipart file
    that :func:`~.classic_params.submit_files` adds."""
    if multipart:
        return {"method": "post"}
    return {"method": "base64", "body": base64.b64encode(body).decode("ascii")}


class Captcha:
    """Base of the captcha kinds: ``type``, its :class:`~.kind.Timing`, its
    :class:`~.kind.Offer` at each provider (``offers``), its :class:`SolveCall`
    (``solve_call``), and ``validate()``."""

    __slots__ = ()
    type: ClassVar[CaptchaType]
    timing: ClassVar[Timing]
    offers: ClassVar[Offers]
    #: Its solve task, generated from this declaration; None: a task of its own.
    solve_call: ClassVar[SolveCall | None] = None

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

    @classmethod
    def shape_answer(cls, solution: Solution, context: AnswerContext) -> Solution:
        """``solution`` (as :mod:`.answers` read it) in the shape a result of this kind
        has, where the answer's shape alone could not tell, with what the job adds
        (``context``). As read, by default."""
        return solution

    def offer_condition(self, provider: Provider, *, proxied: bool) -> str | None:
        """Why ``provider``, whose catalogue names this kind, cannot take this captcha all
        the same (through a proxy if ``proxied``): a field it requires, a variant it
        lacks, in words that follow "provider <name> ". None: it can."""
        return None

    @property
    def what(self) -> str:
        """How refusals name captchas of this kind (``"Grid captchas"``)."""
        return f"{type(self).__name__} captchas"

    def classic_params(self) -> Params:
        """in.php's parameters for this captcha: ``method`` and its fields (None: an unset
        option, left out). ``key``, ``json`` and the proxy are the client's to add."""
        raise InvalidTaskInput(f"in.php has no method for {type(self).__name__}")

    def json_fields(self, provider: Provider) -> Task:
        """The fields of a createTask's ``task`` for this captcha at JSON ``provider``
        (None: an unset option, left out), beside ``type`` and the proxy's, which
        :func:`~.json_tasks.task_for` adds (docs/PROVIDERS.md §3, §4)."""
        raise InvalidTaskInput(f"provider {provider}: no task for {type(self).__name__}")
