"""Settings whose preferred provider differs from another's in a few fields."""

from __future__ import annotations

import dataclasses
from typing import Any

from captcha_tasks.settings import Settings


def with_provider(settings: Settings, **changes: Any) -> Settings:
    """``settings`` with ``changes`` (``threads=2``, ``api_key=...``, ``url=...``) made
    to its preferred provider's configuration; the others as they were."""
    first, *rest = settings.providers()
    return dataclasses.replace(
        settings, provider_configs=(dataclasses.replace(first, **changes), *rest)
    )
