"""Celery's, kombu's and redis-py's internals are touched only inside the seam,
``captcha_tasks/worker/celery_internals/``.

Read from the source (ast), nothing of the package is imported. Outside the seam no
module may:

- import a private name or module of those packages (``from kombu.x import _y``);
- import one of their internal modules (:data:`INTERNAL_MODULES`: what Celery and kombu
  do not document as an extension point);
- read a private attribute that those packages define (``result._maybe_set_cache``),
  unless the package defines a name of its own by that name;
- define, in a class built on one of theirs, a private name theirs define (overriding
  ``_put`` or ``_store_result``);
- assign to an attribute of one of their modules or classes (monkeypatching).

The checker itself is tested on snippets first, so a rule that stopped finding
anything would fail here too.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import textwrap
from collections.abc import Iterator
from functools import cache
from importlib import metadata
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "captcha_tasks"
SEAM = PACKAGE / "worker" / "celery_internals"

#: The distributions the seam keeps behind it (billiard is Celery's process pool).
UPSTREAM = ("celery", "kombu", "redis", "billiard")

#: Modules of theirs that are implementation, not documented API or extension points.
INTERNAL_MODULES = (
    "billiard.einfo",
    "celery.app.amqp",
    "celery.app.trace",
    "celery.app.utils",
    "celery.backends",
    "celery.loaders",
    "celery.worker.consumer",
    "celery.worker.request",
    "celery.worker.state",
    "celery.worker.strategy",
    "kombu.connection",
    "kombu.transport",
    "kombu.utils.objects",
    "redis.connection",
    "redis._parsers",
)


def _is_upstream(module: str) -> bool:
    return module.split(".")[0] in UPSTREAM


def _is_internal(module: str) -> bool:
    return any(module == m or module.startswith(m + ".") for m in INTERNAL_MODULES)


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def _defined_names(tree: ast.AST) -> Iterator[str]:
    """Names a module defines: functions, classes, assigned names and attributes."""
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            yield node.name
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            yield node.id
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
            yield node.attr
        elif isinstance(node, ast.arg):
            yield node.arg
        elif isinstance(node, ast.alias):
            yield (node.asname or node.name).split(".")[0]


@cache
def upstream_private_names() -> frozenset[str]:
    """Every private name the upstream packages define (as installed here)."""
    names: set[str] = set()
    for package in UPSTREAM:
        root = Path(str(metadata.distribution(package).locate_file(package)))
        assert root.is_dir(), root
        for path in root.rglob("*.py"):
            try:
                tree = ast.parse(path.read_text(encoding="utf-8", errors="replace"))
            except SyntaxError:
                continue
            names.update(n for n in _defined_names(tree) if _private(n))
    return frozenset(names)


def violations(source: str, own_names: frozenset[str], private: frozenset[str]) -> list[str]:
    """What ``source`` does that only the seam may, one line each (with line numbers)."""
    tree = ast.parse(source)
    found: list[str] = []
    upstream_bound: dict[str, str] = {}  # local name -> their module or object it binds
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if not _is_upstream(alias.name):
                    continue
                if alias.asname:
                    upstream_bound[alias.asname] = alias.name
                else:
                    root = alias.name.split(".")[0]
                    upstream_bound[root] = root
                if any(_private(p) for p in alias.name.split(".")):
                    found.append(f"{node.lineno}: imports private module {alias.name}")
                elif _is_internal(alias.name):
                    found.append(f"{node.lineno}: imports internal module {alias.name}")
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            if not _is_upstream(node.module):
                continue
            for alias in node.names:
                target = f"{node.module}.{alias.name}"
                upstream_bound[alias.asname or alias.name] = target
                if any(_private(p) for p in target.split(".")):
                    found.append(f"{node.lineno}: imports private name {target}")
                elif _is_internal(node.module) or _is_internal(target):
                    found.append(f"{node.lineno}: imports internal module {target}")
    for node in ast.walk(tree):
        attr = node.attr if isinstance(node, ast.Attribute) else ""
        if _private(attr) and attr in private and attr not in own_names:
            found.append(f"{getattr(node, 'lineno', 0)}: reads their private attribute .{attr}")
        if isinstance(node, ast.ClassDef):
            theirs: set[str] = set()
            for base in node.bases:
                root = _root(base)
                if root in upstream_bound:
                    dotted = ast.unparse(base).replace(root, upstream_bound[root], 1)
                    theirs |= class_private_names(dotted)
            for lineno, name in _defined_in_class(node):
                if name in theirs:
                    found.append(f"{lineno}: {node.name} overrides their private {name}")
        if isinstance(node, ast.Assign | ast.AugAssign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for assigned in targets:
                if isinstance(assigned, ast.Attribute | ast.Subscript):
                    root = _root(assigned)
                    if root in upstream_bound:
                        found.append(f"{node.lineno}: assigns to {ast.unparse(assigned)}")
    return found


def _root(node: ast.AST) -> str:
    while isinstance(node, ast.Attribute | ast.Subscript | ast.Call):
        node = node.func if isinstance(node, ast.Call) else node.value
    return node.id if isinstance(node, ast.Name) else ""


def _defined_in_class(klass: ast.ClassDef) -> Iterator[tuple[int, str]]:
    """What a class body defines (methods, class attributes) and what its methods store
    on ``self``."""
    for item in klass.body:
        if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef):
            yield item.lineno, item.name
        elif isinstance(item, ast.Assign | ast.AnnAssign):
            targets = item.targets if isinstance(item, ast.Assign) else [item.target]
            for target in targets:
                if isinstance(target, ast.Name):
                    yield item.lineno, target.id
    for node in ast.walk(klass):
        if (
            isinstance(node, ast.Attribute)
            and isinstance(node.ctx, ast.Store)
            and isinstance(node.value, ast.Name)
            and node.value.id == "self"
        ):
            yield node.lineno, node.attr


@cache
def class_private_names(dotted: str) -> frozenset[str]:
    """The private names their class ``dotted`` (and its bases of theirs) define, read
    from its source; unknown or unreadable: none."""
    parts = dotted.split(".")
    found: object = None
    for cut in range(len(parts), 0, -1):  # the longest importable module prefix
        module_name = ".".join(parts[:cut])
        try:
            found = importlib.import_module(module_name)
        except ImportError:
            continue
        for attr in parts[cut:]:
            found = getattr(found, attr, None)
        break
    if not isinstance(found, type):
        return frozenset()
    names: set[str] = set()
    for klass in found.__mro__:
        if not _is_upstream(klass.__module__):
            continue
        try:
            tree = ast.parse(textwrap.dedent(inspect.getsource(klass)))
        except (OSError, TypeError, SyntaxError):
            continue
        names.update(n for n in _defined_names(tree) if _private(n))
    return frozenset(names)


def _outside_the_seam() -> Iterator[Path]:
    for path in sorted(PACKAGE.rglob("*.py")):
        if SEAM not in path.parents:
            yield path


@cache
def own_names() -> frozenset[str]:
    """Every name the package defines outside the seam."""
    names: set[str] = set()
    for path in _outside_the_seam():
        names.update(_defined_names(ast.parse(path.read_text())))
    return frozenset(names)


# -- the checker, on snippets ------------------------------------------------------------

PRIVATE = frozenset({"_put", "_maybe_set_cache", "_store_result"})


@pytest.mark.parametrize(
    ("snippet", "finding"),
    [
        ("from kombu.transport import redis", "imports internal module kombu.transport.redis"),
        ("import celery.app.trace", "imports internal module celery.app.trace"),
        ("from celery.worker.state import task_ready", "internal module celery.worker.state"),
        ("from kombu.utils.url import _parse_url", "imports private name"),
        ("r = AsyncResult('x')\nr._maybe_set_cache({})", "private attribute ._maybe_set_cache"),
        (
            "from kombu.transport.redis import Channel as C\nclass X(C):\n def _put(s): ...",
            "X overrides their private _put",
        ),
        (
            "from celery.backends import redis\nclass B(redis.RedisBackend):\n _store_result = 1",
            "B overrides their private _store_result",
        ),
        ("from celery.app import trace\ntrace.LOG_SUCCESS = ''", "assigns to trace.LOG_SUCCESS"),
        ("import kombu\nkombu.connection.resolve_aliases['x'] = 'y'", "assigns to kombu.conn"),
    ],
)
def test_the_checker_finds_each_kind_of_touch(snippet: str, finding: str) -> None:
    found = violations(snippet, frozenset(), PRIVATE)
    assert any(finding in line for line in found), found


def test_the_checker_leaves_public_use_and_our_own_private_names_alone() -> None:
    snippet = (
        "from celery import Celery, signals\n"
        "from celery.result import AsyncResult\n"
        "import redis\n"
        "class Mine:\n"
        "    def _put(self): ...\n"
        "app = Celery('x')\n"
        "app.conf.update(a=1)\n"
        "Mine()._put()\n"
    )
    assert violations(snippet, frozenset({"_put"}), PRIVATE) == []


# -- the package ---------------------------------------------------------------------------


def test_no_module_outside_the_seam_touches_celery_kombu_or_redis_internals() -> None:
    private, own = upstream_private_names(), own_names()
    assert "_put" in private and "_maybe_set_cache" in private  # the scan found them
    found = []
    for path in _outside_the_seam():
        for line in violations(path.read_text(), own, private):
            found.append(f"{path.relative_to(PACKAGE.parent)}:{line}")
    assert found == []


def test_the_seam_is_where_the_touches_are() -> None:
    # The rules find the seam's own touches: it is not empty, and its modules are the
    # ones the docs name.
    private = upstream_private_names()
    touched = {
        path.name
        for path in SEAM.glob("*.py")
        if violations(path.read_text(), frozenset(), private)
    }
    assert {"broker.py", "result_backend.py", "request.py", "tracer.py"} <= touched
