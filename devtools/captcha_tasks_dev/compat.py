"""The version matrix (``make compat``): the worker-level tests on each supported line of
Celery, kombu and redis-py, under Python 3.10 to 3.13, and every declared dependency at
both ends of its range.

Most rows of :data:`ROWS` are an interpreter and exact pins of the three libraries. Two
more take every requirement of the runtime and of each user-facing extra
(:data:`USER_EXTRAS`) from pyproject.toml: the ``newest`` row at the newest release its
range allows (``pip install --upgrade --upgrade-strategy eager``, as a fresh install
resolves it), the ``oldest`` row at its declared floor (a constraints file that pins each
floor ``==``; what the project does not declare resolves as pip chooses). Those two also
run the extras' tests (:data:`EXTRA_TESTS`).

A row gets a virtualenv of its own under ``.compat/<label>/`` (plain ``python -m venv`` and
pip), the package installed in it (editable, with the ``[compat]`` extra: what the
selected tests import, beside the checkout's ``sandbox/`` and ``devtools/``), then pytest
on :data:`SELECTED_TESTS` in that venv. The venv is kept for the next run while its stamp
(the row's pins, the interpreter, the pyproject.toml files' hash) still matches;
``--fresh`` rebuilds it. The newest row's venv is upgraded in place on every run. Rows run
one after another: the tests start redis-servers and worker
processes, and the machine has few cores.

At the end: a Markdown table (one line per row), ``.compat/results.json`` (the last result
of every row, this run's and earlier ones'), and the same table, for every row with a
result, written into the supported-versions page between its marker comments. The exit
code is 1 when a row of this run is red.

:func:`declared_ranges_match` checks, without a venv, that pyproject.toml's ranges for
Celery, kombu and redis-py admit every pinned version and nothing outside the tested
lines, and says what they should be; and that every other requirement of the runtime and
the user-facing extras declares a floor for the oldest row to pin.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import datetime
import fnmatch
import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
import xml.etree.ElementTree as ET  # pytest's own report, not untrusted input
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.version import Version

from .procs import dies_with_us, stop_process

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - the driver runs in the project's venv, 3.11 or later
    import tomli as tomllib

__all__ = [
    "EXTRA_TESTS",
    "ROWS",
    "SELECTED_TESTS",
    "USER_EXTRAS",
    "RangeCheck",
    "Row",
    "RowResult",
    "declared_ranges_match",
    "floor_constraints",
    "main",
    "render_table",
    "select_rows",
]


#: How a row chooses its dependencies: Celery, kombu and redis-py at the row's pins (the
#: rest as pip resolves), or every declared requirement at its newest or its oldest.
Resolution = Literal["pinned", "newest", "oldest"]


@dataclass(frozen=True)
class Row:
    """One combination: an interpreter (``"3.12"``) and exact versions of the three
    libraries (each the latest patch of its line), or, for a ``newest`` or ``oldest`` row,
    an interpreter alone."""

    label: str
    python: str
    celery: str = ""
    kombu: str = ""
    redis: str = ""
    resolution: Resolution = "pinned"

    def pins(self) -> list[str]:
        """The pip requirements that pin this row (none for ``newest`` and ``oldest``)."""
        if self.resolution != "pinned":
            return []
        return [f"celery=={self.celery}", f"kombu=={self.kombu}", f"redis=={self.redis}"]

    def extras(self) -> tuple[str, ...]:
        """The package's extras installed in the row's venv."""
        return ("compat",) if self.resolution == "pinned" else ("compat", *USER_EXTRAS)

    def tests(self) -> tuple[str, ...]:
        """The test files the row runs."""
        if self.resolution == "pinned":
            return SELECTED_TESTS
        return (*SELECTED_TESTS, *(test for extra in USER_EXTRAS for test in EXTRA_TESTS[extra]))


def _stack(label: str, celery: str, kombu: str, redis: str, pythons: Iterable[str]) -> list[Row]:
    return [Row(f"py{py}-{label}", py, celery, kombu, redis) for py in pythons]


_ALL_PYTHONS = ("3.10", "3.11", "3.12", "3.13")

#: The matrix. Celery 5.5 resolves kombu 5.5 (it pins kombu<5.6), whose Redis extra caps
#: redis-py at 5.2.1; Celery 5.6 takes kombu 5.6 (redis-py <6.5) or 5.7 (redis-py >=6.4,<9).
#: redis-py 8.2 needs Python 3.11: on 3.10 kombu 5.7 resolves redis-py 8.1.
#: Celery 5.7 requires kombu 5.7. The newest row runs on the newest Python, the oldest
#: on the oldest.
ROWS: tuple[Row, ...] = (
    *_stack("celery5.5", "5.5.3", "5.5.4", "5.2.1", _ALL_PYTHONS),
    *_stack("celery5.6-kombu5.7", "5.6.3", "5.7.0", "8.1.0", ["3.10"]),
    *_stack("celery5.6-kombu5.7", "5.6.3", "5.7.0", "8.2.0", ["3.11", "3.12", "3.13"]),
    *_stack("celery5.6-kombu5.6", "5.6.3", "5.6.2", "6.4.0", ["3.12"]),
    *_stack("celery5.6-kombu5.7-redis7.4", "5.6.3", "5.7.0", "7.4.1", ["3.11"]),
    *_stack("celery5.6-kombu5.7-redis6.4", "5.6.3", "5.7.0", "6.4.0", ["3.13"]),
    *_stack("celery5.7", "5.7.0", "5.7.0", "8.1.0", ["3.10"]),
    *_stack("celery5.7", "5.7.0", "5.7.0", "8.2.0", ["3.11", "3.12", "3.13"]),
    Row("py3.13-newest", "3.13", resolution="newest"),
    Row("py3.10-oldest", "3.10", resolution="oldest"),
)

#: The extras a user installs (``pip install 'captcha_tasks[mcp]'``): the newest and oldest
#: rows install each and take each requirement's range at both ends. The others
#: (:data:`TOOLING_EXTRAS`) are this repository's own tools.
USER_EXTRAS = ("aio", "mcp", "nats", "otel", "playwright", "scrapy")
TOOLING_EXTRAS = ("compat", "dev", "sdk")
#: The checkout's other distributions, installed editable in every row's venv beside the
#: package: the sandbox the tests solve against, the process helpers they start it with.
LOCAL_DISTRIBUTIONS = ("sandbox", "devtools")

#: The tests of each user-facing extra, run by the newest and oldest rows beside
#: :data:`SELECTED_TESTS` (``aio``'s, test_aio.py, is among those).
EXTRA_TESTS: Mapping[str, tuple[str, ...]] = {
    "aio": (),
    "mcp": (
        "tests/integration/test_mcp.py",
        "tests/unit/test_mcp_tools.py",
        "tests/unit/test_mcp_agents.py",
        "tests/unit/test_settings_mcp.py",
    ),
    "nats": ("tests/integration/test_bridge_nats.py", "tests/unit/bridge/test_bridge.py"),
    "otel": ("tests/integration/test_traces.py", "tests/unit/test_tracing.py"),
    "playwright": (
        "tests/integration/test_playwright.py",
        "tests/unit/contrib/test_browser_cookies.py",
    ),
    "scrapy": (
        "tests/integration/test_scrapy.py",
        "tests/unit/contrib/test_scrapy_challenge.py",
        "tests/unit/contrib/test_scrapy_coalesce.py",
        "tests/unit/contrib/test_scrapy_cookies.py",
        "tests/unit/contrib/test_scrapy_options.py",
    ),
}

#: The worker-level tests each row runs: a solve's round trip, redelivery after a SIGKILL,
#: result states, the user's own app, ``aio``, a Redis restart and an outage under a
#: worker (reported once, in Celery's log format of each line), and the Celery/kombu
#: seam's contracts, grep test and fallbacks.
#: A file that does not exist (yet) is skipped with a note.
SELECTED_TESTS: tuple[str, ...] = (
    "tests/integration/test_worker_roundtrip.py",
    "tests/integration/test_redelivery.py",
    "tests/integration/test_result_states.py",
    "tests/integration/test_your_own_app.py",
    "tests/integration/test_aio.py",
    "tests/integration/test_transport.py",
    "tests/integration/test_admit_inline.py",
    "tests/integration/test_result_get.py",
    "tests/integration/test_callbacks.py",
    "tests/integration/test_connection_loss.py",
    "tests/integration/test_worker_startup.py",
    "tests/unit/test_celery_contracts.py",
    "tests/unit/test_celery_seam.py",
    "tests/integration/test_celery_fallbacks.py",
)

#: The interpreters of this machine (pyenv's builds); ``--python 3.12=/path`` overrides one.
DEFAULT_INTERPRETERS: Mapping[str, str] = {
    "3.10": "/root/.pyenv/versions/3.10.13/bin/python3.10",
    "3.11": "/root/.pyenv/versions/3.11.7/bin/python3.11",
    "3.12": "/root/.pyenv/versions/3.12.1/bin/python3.12",
    "3.13": "/root/.pyenv/versions/3.13.0/bin/python3.13",
}

#: The distributions whose installed versions each row records; the newest and oldest rows
#: also record every requirement they take from pyproject.toml.
RECORDED = ("celery", "kombu", "redis", "billiard", "hiredis")
#: Recorded on the newest and oldest rows beside the declared requirements: mcp's pydantic.
RECORDED_TOO = ("pydantic",)

#: The libraries whose pyproject.toml ranges :func:`declared_ranges_match` checks.
CHECKED = ("celery", "kombu", "redis")

ROOT = Path(__file__).resolve().parents[2]
WORK_DIR = ROOT / ".compat"
DOCS_PAGE = ROOT / "docs" / "reference" / "supported-versions.md"
TABLE_START = "<!-- compat-table:start -->"
TABLE_END = "<!-- compat-table:end -->"
RANGES_START = "<!-- compat-ranges:start -->"
RANGES_END = "<!-- compat-ranges:end -->"

#: Limits on one row's pip install and on its pytest run (each test also has pytest's
#: own ``timeout``); past them the process group is stopped and the row is red.
INSTALL_TIMEOUT = 15 * 60.0
ROW_TIMEOUT = 15 * 60.0

_VERSIONS_SCRIPT = """
import importlib.metadata as md, json, platform
out = {"python": platform.python_version()}
for name in %r:
    try:
        out[name] = md.version(name)
    except md.PackageNotFoundError:
        out[name] = None
print(json.dumps(out))
"""


# -- selection -------------------------------------------------------------------------


def select_rows(rows: Sequence[Row], patterns: str | None) -> list[Row]:
    """The rows whose label matches one of the comma-separated ``patterns``: a glob
    (``py3.1[01]-*``) matches the whole label, a plain word anywhere in it (``5.5``,
    ``py3.13``). ``None`` or empty: every row."""
    if not patterns:
        return list(rows)
    wanted = [p.strip() for p in patterns.split(",") if p.strip()]

    def matches(label: str, pattern: str) -> bool:
        if any(c in pattern for c in "*?["):
            return fnmatch.fnmatchcase(label, pattern)
        return pattern in label

    return [row for row in rows if any(matches(row.label, p) for p in wanted)]


def present_tests(root: Path, tests: Sequence[str]) -> tuple[list[str], list[str]]:
    """The selected test files that exist under ``root``, and those that do not."""
    present = [t for t in tests if (root / t).is_file()]
    return present, [t for t in tests if t not in present]


# -- results ---------------------------------------------------------------------------


@dataclass
class RowResult:
    """What one row did: the versions installed, the counts, the times, the first failure."""

    label: str
    pins: dict[str, str]
    installed: dict[str, str | None] = field(default_factory=dict)
    resolution: str = "pinned"
    passed: int = 0
    failed: int = 0
    errors: int = 0
    skipped: int = 0
    install_seconds: float = 0.0
    test_seconds: float = 0.0
    green: bool = False
    #: The first failing test's id and the first line of its failure, or why the row
    #: did not get as far as its tests.
    first_failure: str | None = None
    failure_line: str | None = None
    file_seconds: dict[str, float] = field(default_factory=dict)
    missing_tests: list[str] = field(default_factory=list)
    checked: str = ""

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> RowResult:
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in names})


def _fmt_seconds(seconds: float) -> str:
    minutes, secs = divmod(round(seconds), 60)
    return f"{minutes}m{secs:02d}s" if minutes else f"{secs}s"


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def render_table(results: Sequence[RowResult], *, checked: bool = False) -> str:
    """The Markdown table: one line per result, the versions as installed (the pins where
    the row did not get as far as installing). ``checked`` adds the date of each run."""
    head = ["row", "Python", "Celery", "kombu", "redis-py", "passed", "failed", "wall", "result"]
    if checked:
        head.append("checked")
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in results:

        def version(name: str, r: RowResult = r) -> str:
            return r.installed.get(name) or r.pins.get(name) or "?"

        if r.green:
            outcome = "green"
        else:
            outcome = "red"
            if r.first_failure:
                outcome += f": `{_cell(r.first_failure)}`"
            if r.failure_line:
                line = (
                    r.failure_line if len(r.failure_line) <= 120 else r.failure_line[:117] + "..."
                )
                outcome += f" ({_cell(line)})"
        cells = [
            "pins" if r.resolution == "pinned" else r.resolution,
            version("python"),
            version("celery"),
            version("kombu"),
            version("redis"),
            str(r.passed),
            str(r.failed + r.errors),
            _fmt_seconds(r.test_seconds),
            outcome,
        ]
        if checked:
            cells.append(r.checked)
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def render_ranges(results: Sequence[RowResult], pyproject: Path | None = None) -> str:
    """The Markdown table of every requirement of the runtime and the user-facing extras:
    its declared range and the version the oldest and the newest row installed."""
    by_kind = {r.resolution: r for r in results}
    lines = [
        "| requirement | of | declared | oldest row | newest row |",
        "|---|---|---|---|---|",
    ]

    def installed(kind: str, name: str) -> str:
        result = by_kind.get(kind)
        return (result.installed.get(name) or "-") if result is not None else "not run"

    for name, spec, group in declared_requirements(pyproject or ROOT / "pyproject.toml"):
        cells = [name, group, _cell(spec), installed("oldest", name), installed("newest", name)]
        lines.append("| " + " | ".join(cells) + " |")
    for name in RECORDED_TOO:
        cells = [name, "mcp's", "(not declared)", installed("oldest", name)]
        lines.append("| " + " | ".join([*cells, installed("newest", name)]) + " |")
    return "\n".join(lines) + "\n"


def replace_between_markers(
    text: str, table: str, start_marker: str = TABLE_START, end_marker: str = TABLE_END
) -> str:
    """``text`` with what lies between the table's marker comments replaced by ``table``."""
    start, end = text.find(start_marker), text.find(end_marker)
    if start < 0 or end < start:
        raise ValueError(f"the page has no {start_marker} ... {end_marker} markers")
    return text[: start + len(start_marker)] + "\n\n" + table + "\n" + text[end:]


def parse_junit(path: Path, root: Path = ROOT) -> dict[str, Any]:
    """Counts, per-file test time and the first failure from pytest's ``--junitxml``."""
    tree = ET.parse(path)  # noqa: S314 (written by our own pytest run)
    counts = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
    for suite in tree.iter("testsuite"):
        for key in counts:
            counts[key] += int(suite.get(key, "0"))
    first: tuple[str, str] | None = None
    per_file: dict[str, float] = {}
    for case in tree.iter("testcase"):
        # A module that fails to import: no class name, the module as the test's name.
        test_file = _test_file(case.get("classname") or case.get("name") or "", root)
        per_file[test_file] = per_file.get(test_file, 0.0) + float(case.get("time", "0") or 0)
        bad = case.find("failure")
        if bad is None:
            bad = case.find("error")
        if bad is not None and first is None:
            test_id = f"{test_file}::{case.get('name')}" if case.get("classname") else test_file
            first = (test_id, _failure_line(bad))
    return {
        "passed": counts["tests"] - counts["failures"] - counts["errors"] - counts["skipped"],
        "failed": counts["failures"],
        "errors": counts["errors"],
        "skipped": counts["skipped"],
        "first_failure": first[0] if first else None,
        "failure_line": first[1] if first else None,
        "file_seconds": {k: round(v, 1) for k, v in per_file.items()},
    }


def _failure_line(element: ET.Element) -> str:
    """The first line of a failure's message; for pytest's bare "collection failure",
    the exception line (``E   ImportError: ...``) of its report."""
    message = (element.get("message") or "").strip()
    if message and message != "collection failure":
        return message.splitlines()[0]
    for line in (element.text or "").splitlines():
        if line.startswith("E "):
            return line[1:].strip()
    return message


def _test_file(classname: str, root: Path) -> str:
    """``tests.integration.test_aio.TestX`` -> ``tests/integration/test_aio.py``."""
    parts = classname.split(".")
    for n in range(len(parts), 0, -1):
        candidate = "/".join(parts[:n]) + ".py"
        if (root / candidate).is_file():
            return candidate
    return classname


# -- pyproject's ranges ----------------------------------------------------------------


@dataclass
class RangeCheck:
    """What :func:`declared_ranges_match` found: ``problems`` (empty when the ranges are
    right) and, per library, the range that pyproject.toml should declare."""

    problems: list[str]
    declared: dict[str, str]
    suggested: dict[str, str]

    def __bool__(self) -> bool:
        return not self.problems


def declared_requirements(pyproject: Path) -> list[tuple[str, str, str]]:
    """Every requirement of the runtime and of the user-facing extras, as (name, range,
    where: ``runtime`` or ``[extra]``), in pyproject.toml's order; a name the runtime
    declares already is left out of an extra."""
    project = tomllib.loads(pyproject.read_text(encoding="utf-8")).get("project", {})
    groups = [("runtime", project.get("dependencies", []))]
    extras = project.get("optional-dependencies", {})
    groups += [(f"[{extra}]", extras.get(extra, [])) for extra in USER_EXTRAS]
    found: list[tuple[str, str, str]] = []
    seen: set[str] = set()
    for group, lines in groups:
        for line in lines:
            req = Requirement(line)
            name = req.name.lower()
            if name == "captcha-tasks" or name in seen:
                continue
            seen.add(name)
            found.append((name, str(req.specifier), group))
    return found


def _floor(spec: SpecifierSet) -> Version | None:
    """The lowest version ``spec`` names as admitted (``>=``, ``==``, ``~=``)."""
    floors = [Version(s.version) for s in spec if s.operator in (">=", "==", "~=")]
    return min(floors) if floors else None


def floor_constraints(pyproject: Path = ROOT / "pyproject.toml") -> list[str]:
    """The oldest row's constraints: each requirement of the runtime and the user-facing
    extras pinned ``==`` its declared floor. A requirement without one raises ValueError
    (:func:`declared_ranges_match` names it too)."""
    out = []
    for name, spec, group in declared_requirements(pyproject):
        floor = _floor(SpecifierSet(spec))
        if floor is None:
            raise ValueError(f"{name} ({group}) declares no floor: {spec or 'any version'}")
        out.append(f"{name}=={floor}")
    return out


def _declared(pyproject: Path) -> dict[str, SpecifierSet | None]:
    data = tomllib.loads(pyproject.read_text(encoding="utf-8"))
    found: dict[str, SpecifierSet | None] = dict.fromkeys(CHECKED)
    for line in data.get("project", {}).get("dependencies", []):
        req = Requirement(line)
        name = req.name.lower()
        if name in found:
            previous = found[name]
            found[name] = req.specifier if previous is None else previous & req.specifier
    return found


def declared_ranges_match(
    rows: Sequence[Row], pyproject: Path = ROOT / "pyproject.toml"
) -> RangeCheck:
    """Whether pyproject.toml's dependencies declare, for Celery, kombu and redis-py, a
    range that admits every version pinned in ``rows`` and nothing outside the tested
    lines: not the release before the lowest tested line (``X.Y.0`` of the lowest pin)
    and not the next line after the highest one (``X.(Y+1)``). A library the project
    does not declare itself (it comes in through another's requirements) is a problem
    too: its range is then whatever that other library allows.

    The suggested range of each library is ``>=X.Y`` of its lowest pin and ``<X.(Y+1)``
    of its highest. The newest and oldest rows pin nothing; for them every requirement of
    the runtime and the user-facing extras must declare a floor, and pyproject.toml's
    extras must each be one of :data:`USER_EXTRAS` or :data:`TOOLING_EXTRAS`."""
    declared = _declared(pyproject)
    problems: list[str] = []
    suggested: dict[str, str] = {}
    project = tomllib.loads(pyproject.read_text(encoding="utf-8")).get("project", {})
    extras = set(project.get("optional-dependencies", {}))
    for extra in sorted(extras - set(USER_EXTRAS) - set(TOOLING_EXTRAS)):
        problems.append(f"[{extra}]: neither a user-facing nor a tooling extra of compat.py")
    for name, text, group in declared_requirements(pyproject):
        if _floor(SpecifierSet(text)) is None:
            problems.append(f"{name} ({group}): no floor for the oldest row to pin")
    for name in CHECKED:
        pinned = sorted({Version(getattr(row, name)) for row in rows if row.resolution == "pinned"})
        if not pinned:
            continue
        low, high = pinned[0], pinned[-1]
        first = Version(f"{low.major}.{low.minor}")
        beyond = Version(f"{high.major}.{high.minor + 1}")
        suggested[name] = f">={first},<{beyond}"
        spec = declared[name]
        if spec is None:
            problems.append(f"{name}: pyproject.toml declares no range (tested: {suggested[name]})")
            continue
        for version in pinned:
            if not spec.contains(version, prereleases=True):
                problems.append(f"{name}: {spec} excludes the tested {version}")
        below = _just_below(first)
        if below is not None and spec.contains(below, prereleases=True):
            problems.append(f"{name}: {spec} admits {below}, below the tested lines")
        # The next line's first releases: an exclusion of one release (!=5.7.0) does not
        # make the line untested-and-refused.
        for probe in (beyond, Version(f"{beyond}.1"), Version(f"{beyond}.999")):
            if spec.contains(probe, prereleases=True):
                problems.append(f"{name}: {spec} admits {probe}, past the tested lines")
                break
    return RangeCheck(
        problems=problems,
        declared={k: str(v) if v is not None else "" for k, v in declared.items()},
        suggested=suggested,
    )


def _just_below(first: Version) -> Version | None:
    """The last release one could ship before ``first`` (``X.Y``): ``X.(Y-1).999``, or
    ``(X-1).999`` on a new major; ``None`` below ``0.0``."""
    if first.minor > 0:
        return Version(f"{first.major}.{first.minor - 1}.999")
    if first.major > 0:
        return Version(f"{first.major - 1}.999")
    return None


# -- running a row ---------------------------------------------------------------------


def _pyproject_hash(root: Path) -> str:
    digest = hashlib.sha256((root / "pyproject.toml").read_bytes())
    for name in LOCAL_DISTRIBUTIONS:
        digest.update((root / name / "pyproject.toml").read_bytes())
    return digest.hexdigest()


def _run(
    argv: Sequence[str],
    *,
    timeout: float,
    log: Path,
    cwd: Path,
    env: Mapping[str, str] | None = None,
) -> tuple[int | None, bool]:
    """Run ``argv`` in a session of its own, its output in ``log``; past ``timeout`` stop
    its process group by PID. Returns (exit code, timed out)."""
    with log.open("ab") as out:
        proc = subprocess.Popen(
            list(argv),
            cwd=cwd,
            env=dict(env) if env is not None else None,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=dies_with_us(),
        )
        try:
            return proc.wait(timeout=timeout), False
        except subprocess.TimeoutExpired:
            return stop_process(proc, group=True, timeout=20), True
        finally:
            if proc.poll() is None:  # KeyboardInterrupt while waiting
                stop_process(proc, group=True, timeout=10)


def _tail(log: Path, lines: int = 1) -> str:
    try:
        text = log.read_text(encoding="utf-8", errors="replace").strip().splitlines()
    except OSError:
        return ""
    return " / ".join(text[-lines:])


def ensure_venv(
    row: Row, python: str, *, fresh: bool, root: Path = ROOT
) -> tuple[Path, float, str | None]:
    """The row's venv, built (or rebuilt) unless its stamp matches; the newest row's is
    upgraded in place when it does. Returns its directory, the seconds spent installing,
    and an error line when the install failed."""
    venv = root / ".compat" / row.label
    stamp_path = venv / ".stamp.json"
    constraints = floor_constraints(root / "pyproject.toml") if row.resolution == "oldest" else []
    stamp = {
        "pins": row.pins(),
        "resolution": row.resolution,
        "constraints": constraints,
        "python": python,
        "pyproject": _pyproject_hash(root),
    }
    matches = False
    if not fresh and stamp_path.is_file():
        with contextlib.suppress(ValueError, OSError):
            matches = json.loads(stamp_path.read_text(encoding="utf-8")) == stamp
    if matches and row.resolution != "newest":
        return venv, 0.0, None
    if not Path(python).is_file():
        return venv, 0.0, f"no interpreter at {python} (--python {row.python}=PATH)"
    started = time.monotonic()
    venv.parent.mkdir(parents=True, exist_ok=True)
    log = venv.parent / f"{row.label}.install.log"
    log.write_bytes(b"")
    if not matches:
        if venv.exists():
            shutil.rmtree(venv)
        code, late = _run([python, "-m", "venv", str(venv)], timeout=120, log=log, cwd=root)
        if code != 0:
            return venv, time.monotonic() - started, f"python -m venv failed: {_tail(log)}"
    pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "--disable-pip-version-check"]
    how: list[str] = list(row.pins())
    if row.resolution == "newest":
        how = ["--upgrade", "--upgrade-strategy", "eager"]
    elif row.resolution == "oldest":
        constraints_file = venv.parent / f"{row.label}.constraints.txt"
        constraints_file.write_text("\n".join(constraints) + "\n", encoding="utf-8")
        how = ["--constraint", str(constraints_file)]
    code, late = _run(
        [
            *pip,
            "--quiet",
            "-e",
            f"{root}[{','.join(row.extras())}]",
            *(arg for name in LOCAL_DISTRIBUTIONS for arg in ("-e", str(root / name))),
            *how,
        ],
        timeout=INSTALL_TIMEOUT,
        log=log,
        cwd=root,
    )
    seconds = time.monotonic() - started
    if code != 0:
        why = "timed out" if late else f"exit {code}"
        return venv, seconds, f"pip install {why}: {_tail(log)} (log: {log.relative_to(root)})"
    stamp_path.write_text(json.dumps(stamp), encoding="utf-8")
    return venv, seconds, None


def installed_versions(venv: Path, names: Sequence[str] = RECORDED) -> dict[str, str | None]:
    """Python's and ``names``' versions as the venv sees them."""
    out = subprocess.run(
        [str(venv / "bin" / "python"), "-c", _VERSIONS_SCRIPT % (tuple(names),)],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    versions: dict[str, str | None] = json.loads(out.stdout)
    return versions


def run_row(
    row: Row,
    python: str,
    tests: Sequence[str],
    missing: Sequence[str],
    *,
    jobs: int,
    fresh: bool,
    root: Path = ROOT,
) -> RowResult:
    """Build (or reuse) the row's venv, then run the tests in it."""
    result = RowResult(
        label=row.label,
        pins={"python": row.python, "celery": row.celery, "kombu": row.kombu, "redis": row.redis},
        resolution=row.resolution,
        missing_tests=list(missing),
        checked=datetime.date.today().isoformat(),
    )
    venv, result.install_seconds, error = ensure_venv(row, python, fresh=fresh, root=root)
    if error is not None:
        result.first_failure, result.failure_line = "install", error
        return result
    names = list(RECORDED)
    if row.resolution != "pinned":
        names += [name for name, _, _ in declared_requirements(root / "pyproject.toml")]
        names += RECORDED_TOO
    try:
        result.installed = installed_versions(venv, list(dict.fromkeys(names)))
    except (subprocess.SubprocessError, OSError, ValueError) as exc:
        result.first_failure, result.failure_line = "install", f"reading its versions: {exc}"
        return result
    junit = venv / "junit.xml"
    junit.unlink(missing_ok=True)
    log = root / ".compat" / f"{row.label}.pytest.log"
    log.write_bytes(b"")
    argv = [
        str(venv / "bin" / "python"),
        "-m",
        "pytest",
        *tests,
        "-p",
        "no:cacheprovider",
        "-q",
        "-n",
        str(jobs),
        f"--junitxml={junit}",
    ]
    env = {
        **os.environ,
        "VIRTUAL_ENV": str(venv),
        "PATH": f"{venv / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}",
    }
    env.pop("PYTHONPATH", None)
    started = time.monotonic()
    code, late = _run(argv, timeout=ROW_TIMEOUT, log=log, cwd=root, env=env)
    result.test_seconds = time.monotonic() - started
    if junit.is_file():
        for key, value in parse_junit(junit, root).items():
            setattr(result, key, value)
    result.green = code == 0 and not late and junit.is_file()
    if not result.green and result.first_failure is None:
        result.first_failure = "pytest"
        why = f"timed out after {_fmt_seconds(ROW_TIMEOUT)}" if late else f"exit {code}"
        result.failure_line = f"{why}: {_tail(log)} (log: {log.relative_to(root)})"
    return result


# -- the command -----------------------------------------------------------------------


def _interpreters(overrides: Sequence[str]) -> dict[str, str]:
    found = dict(DEFAULT_INTERPRETERS)
    for item in overrides:
        version, sep, path = item.partition("=")
        if not sep or not path:
            raise SystemExit(f"--python wants VERSION=PATH, not {item!r}")
        found[version] = path
    return found


def load_results(path: Path) -> dict[str, RowResult]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return {label: RowResult.from_json(item) for label, item in data.get("rows", {}).items()}


def merged(
    rows: Sequence[Row], earlier: Mapping[str, RowResult], now: Sequence[RowResult]
) -> list[RowResult]:
    """Every row's latest result, in :data:`ROWS` order; earlier results of a row whose
    pins have changed since are dropped."""
    latest = dict(earlier)
    latest.update({r.label: r for r in now})
    out = []
    for row in rows:
        r = latest.get(row.label)
        if (
            r is not None
            and r.pins.get("celery") == row.celery
            and r.pins.get("kombu") == row.kombu
            and r.pins.get("redis") == row.redis
            and r.resolution == row.resolution
        ):
            out.append(r)
    return out


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m captcha_tasks_dev.compat",
        description=(
            "Run the worker-level tests on each row of the version matrix (Python x Celery x "
            "kombu x redis-py), one row after another, each in its own venv under .compat/. "
            "Prints a Markdown table, writes .compat/results.json and the table of every row "
            "with a result into docs/reference/supported-versions.md. Exit code 1 when a row "
            "of this run is red (every selected row runs unless --stop-on-red), 2 on bad arguments."
        ),
    )
    parser.add_argument(
        "--rows",
        metavar="PATTERN",
        help="only the rows whose label matches: comma-separated globs (py3.1[01]-*) or words "
        "found anywhere in the label (5.5, py3.13, kombu5.6); see --list",
    )
    parser.add_argument(
        "--list",
        action="store_true",
        help="list the selected rows (label, pins, interpreter) and exit",
    )
    parser.add_argument(
        "--fresh",
        action="store_true",
        help="rebuild the selected rows' venvs even when their stamp matches",
    )
    parser.add_argument(
        "--jobs",
        type=int,
        default=2,
        metavar="N",
        help="pytest-xdist processes per row (default 2)",
    )
    parser.add_argument(
        "--python",
        action="append",
        default=[],
        metavar="VERSION=PATH",
        help="the interpreter of a Python version (e.g. 3.12=/usr/bin/python3.12); "
        "default: this machine's pyenv builds under /root/.pyenv/versions",
    )
    parser.add_argument(
        "--no-docs",
        action="store_true",
        help="do not write the table into the supported-versions page",
    )
    parser.add_argument(
        "--stop-on-red",
        dest="keep_going",
        action="store_false",
        help="stop after the first red row (default: run every selected row)",
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    interpreters = _interpreters(args.python)
    rows = select_rows(ROWS, args.rows)
    if not rows:
        print(f"no row matches {args.rows!r} (see --list)", file=sys.stderr)
        return 2
    if args.list:
        for row in rows:
            how = " ".join(row.pins()) or f"every requirement at its {row.resolution}"
            print(f"{row.label:40} {how:45} {interpreters.get(row.python, '?')}")
        return 0

    ranges = declared_ranges_match(ROWS)
    results: list[RowResult] = []
    for n, row in enumerate(rows, 1):
        tests, missing = present_tests(ROOT, row.tests())
        for name in missing:
            print(f"compat: {name} does not exist; skipped")
        how = " ".join(row.pins()) or f"every requirement at its {row.resolution}"
        print(f"compat: [{n}/{len(rows)}] {row.label}: {how}", flush=True)
        python = interpreters.get(row.python, "")
        result = run_row(row, python, tests, missing, jobs=args.jobs, fresh=args.fresh)
        results.append(result)
        print(
            f"compat:   {'green' if result.green else 'red'}: {result.passed} passed, "
            f"{result.failed + result.errors} failed, {result.skipped} skipped; "
            f"install {_fmt_seconds(result.install_seconds)}, "
            f"tests {_fmt_seconds(result.test_seconds)}"
            + (f"; {result.first_failure}: {result.failure_line}" if not result.green else ""),
            flush=True,
        )
        if not result.green and not args.keep_going:
            break

    results_path = WORK_DIR / "results.json"
    every = merged(ROWS, load_results(results_path), results)
    WORK_DIR.mkdir(exist_ok=True)
    results_path.write_text(
        json.dumps(
            {
                "rows": {r.label: r.to_json() for r in every},
                "ranges": {
                    "problems": ranges.problems,
                    "declared": ranges.declared,
                    "suggested": ranges.suggested,
                },
            },
            indent=2,
        )
        + "\n",
        encoding="utf-8",
    )
    if not args.no_docs and DOCS_PAGE.is_file():
        page = replace_between_markers(
            DOCS_PAGE.read_text(encoding="utf-8"), render_table(every, checked=True)
        )
        page = replace_between_markers(page, render_ranges(every), RANGES_START, RANGES_END)
        DOCS_PAGE.write_text(page, encoding="utf-8")

    print()
    print(render_table(results))
    if any(r.resolution != "pinned" for r in results):
        print(render_ranges(results))
    if ranges:
        print("pyproject.toml's ranges match the tested versions.")
    else:
        print("pyproject.toml's ranges do not match the tested versions:")
        for problem in ranges.problems:
            print(f"  - {problem}")
        print("  tested: " + ", ".join(f"{k}{v}" for k, v in ranges.suggested.items()))
    return 0 if all(r.green for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
