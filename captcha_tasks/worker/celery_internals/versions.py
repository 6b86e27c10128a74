"""The Celery, kombu and redis-py versions captcha_tasks is tested with, and a check a
worker runs when it starts.

The tested ranges are the package's own declared dependencies and Python classifiers
(``pyproject.toml``, read back from the installed metadata): ``make compat`` runs the
worker-level tests on every line those ranges admit, and its driver fails when the two
disagree. A user whose application pins something else (``pip install --no-deps``, a
vendored Celery) still gets a worker; it says once, at start, which version is outside
the tested range.
"""

from __future__ import annotations

import logging
import sys
from importlib import metadata

from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import SpecifierSet

__all__ = [
    "PACKAGES",
    "installed",
    "outside_tested",
    "tested_pythons",
    "tested_ranges",
    "warn_if_untested",
]

log = logging.getLogger("captcha_tasks.worker.celery_internals")

#: The distributions whose internals the seam touches.
PACKAGES = ("celery", "kombu", "redis")

_warned = False


def installed() -> dict[str, str]:
    """The running Python's and each package's version (``?`` when not installed)."""
    found = {"python": ".".join(map(str, sys.version_info[:3]))}
    for name in PACKAGES:
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            found[name] = "?"
    return found


def tested_ranges() -> dict[str, SpecifierSet]:
    """Each package's range as captcha_tasks declares it (empty when it is not installed
    as a distribution, as in a checkout run without ``pip install``)."""
    ranges: dict[str, SpecifierSet] = {}
    try:
        requires = metadata.requires("captcha_tasks") or []
    except metadata.PackageNotFoundError:
        return ranges
    for line in requires:
        try:
            requirement = Requirement(line)
        except InvalidRequirement:
            continue
        if requirement.marker is not None and "extra" in str(requirement.marker):
            continue
        if requirement.name in PACKAGES:
            ranges[requirement.name] = requirement.specifier
    return ranges


def tested_pythons() -> list[str]:
    """The Python minor versions the package's classifiers name (``["3.10", ...]``)."""
    try:
        classifiers = metadata.metadata("captcha_tasks").get_all("Classifier") or []
    except metadata.PackageNotFoundError:
        return []
    prefix = "Programming Language :: Python :: "
    return [c[len(prefix) :] for c in classifiers if c.startswith(prefix + "3.")]


def outside_tested() -> list[str]:
    """One line per installed package (and the Python) outside what was tested."""
    versions = installed()
    lines = []
    pythons = tested_pythons()
    minor = ".".join(versions["python"].split(".")[:2])
    if pythons and minor not in pythons:
        lines.append(f"Python {versions['python']} (tested: {', '.join(pythons)})")
    for name, specifier in tested_ranges().items():
        version = versions.get(name, "?")
        if version != "?" and not specifier.contains(version, prereleases=True):
            lines.append(f"{name} {version} (tested: {specifier})")
    return lines


def warn_if_untested() -> list[str]:
    """Log, once per process, which versions are outside the tested ranges."""
    global _warned
    if _warned:
        return []
    _warned = True
    lines = outside_tested()
    if lines:
        log.warning(
            "captcha_tasks is not tested with %s; it falls back to Celery's public paths "
            "wherever an assumption about their internals does not hold (see the "
            "supported versions page of the documentation)",
            ", ".join(lines),
        )
    return lines
