"""Which configured providers may take a captcha, in order of preference.

A captcha's route is ``CAPTCHA_TASKS_PROVIDERS``'s order filtered by each provider's
``_TYPES`` and by what its protocol solves (:func:`~.offers.refusal`, proxied or not);
a task may pin one provider (``provider=``) or leave some out (``exclude=``). Pure: the
engine computes a job's route once, at admission, and stores it with the job.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

from ..errors import InvalidTaskInput
from ..settings.providers import ProviderConfig
from .captchas import Captcha
from .offers import offered_by, refusal, withdrawal

__all__ = ["route"]


def route(
    configs: Sequence[ProviderConfig],
    captcha: Captcha,
    *,
    proxied: bool = False,
    provider: str | None = None,
    exclude: Collection[str] = (),
) -> list[str]:
    """The names of the providers that may take ``captcha``, most preferred first.

    Raises :class:`InvalidTaskInput`: ``UNKNOWN_PROVIDER`` when ``provider`` or a name
    in ``exclude`` is not configured; ``TYPE_NOT_OFFERED`` (naming each candidate and
    why it was left out) when none is left. Nothing has been sent either way.
    """
    known = [config.name for config in configs]
    unknown = sorted({*([provider] if provider is not None else []), *exclude} - set(known))
    if unknown:
        raise InvalidTaskInput(
            f"no provider named {', '.join(unknown)} is configured "
            f"(CAPTCHA_TASKS_PROVIDERS: {', '.join(known)}); nothing was sent",
            "UNKNOWN_PROVIDER",
        )
    names: list[str] = []
    left_out: list[tuple[ProviderConfig, str]] = []
    for config in configs:
        if provider is not None and config.name != provider:
            continue
        reason = _left_out(config, captcha, proxied=proxied, exclude=exclude)
        if reason is None:
            names.append(config.name)
        else:
            left_out.append((config, reason))
    if names:
        return names
    # Left out by what its protocol solves (withdrawn, or never offered): say who does.
    refused = [config for config, _ in left_out if refusal(config.protocol, captcha)]
    withdrawn = any(withdrawal(config.protocol, captcha) for config in refused)
    elsewhere = _elsewhere(configs, captcha, still=withdrawn) if refused else ""
    if len(left_out) == 1 and left_out[0][1].startswith(f"provider {left_out[0][0].protocol} "):
        # One candidate refused by its protocol: the same message as check_offered's.
        raise InvalidTaskInput(f"{left_out[0][1]}{elsewhere}; nothing was sent", "TYPE_NOT_OFFERED")
    why_not = "; ".join(f"{config.name} ({config.protocol}): {why}" for config, why in left_out)
    raise InvalidTaskInput(
        f"no configured provider takes {type(captcha).__name__} captchas ({why_not})"
        f"{elsewhere}; nothing was sent",
        "TYPE_NOT_OFFERED",
    )


def _elsewhere(configs: Sequence[ProviderConfig], captcha: Captcha, *, still: bool) -> str:
    """Which configured provider (its ``_TYPES`` permitting) offers a kind another one
    does not (or withdrew), else which provider does at all."""
    offering = set(offered_by(captcha))
    configured = [
        config.name
        for config in configs
        if config.protocol in offering and config.takes_type(captcha.type)
    ]
    if configured:
        return (
            f"; {'still ' if still else ''}offered by configured provider {', '.join(configured)}"
        )
    if offering:
        names = ", ".join(sorted(offering))
        return f"; no configured provider offers it (offered by: {names})"
    return "; no provider offers it any more"


def _left_out(
    config: ProviderConfig, captcha: Captcha, *, proxied: bool, exclude: Collection[str]
) -> str | None:
    if config.name in exclude:
        return "excluded by the task"
    if not config.takes_type(captcha.type):
        var = f"CAPTCHA_TASKS_{config.name.upper()}_TYPES"
        return f"{captcha.type} is not in {var} ({','.join(config.types)})"
    return refusal(config.protocol, captcha, proxied=proxied)
