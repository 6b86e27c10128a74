"""The version a worker reports: ``CAPTCHA_TASKS_VERSION`` if set, else the package's."""

from __future__ import annotations

import os
from importlib.metadata import PackageNotFoundError
from importlib.metadata import version as _dist_version

__all__ = ["__version__", "worker_version"]

try:
    __version__ = _dist_version("captcha_tasks")
except PackageNotFoundError:  # running from a source tree that was never installed
    __version__ = "0.0.0+unknown"


def worker_version() -> str:
    """What this process reports as its version (rolling deploys compare it)."""
    return os.environ.get("CAPTCHA_TASKS_VERSION", "").strip() or __version__
