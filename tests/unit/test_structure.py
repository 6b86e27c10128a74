"""The package's layout holds: layers only import downwards (in functions too), Celery
stays in worker/ (and the CLI, and aio's awaiting of a result), and the runtime
imports neither the sandbox (captcha_tasks_sandbox) nor the developer tools
(captcha_tasks_dev), which are distributions of their own. Read from the source (ast),
nothing is imported."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "captcha_tasks"

#: Layers, lowest first. A module may import its own layer and the ones below.
# Aligned by hand, one layer a line (the formatter would put each module on its own line
# and lose which ones share a layer).
LAYERS: dict[str, int] = {
    "errors": 0, "redaction": 0, "version": 0, "forksafe": 0, "lazy": 0, "results": 0, "tracing": 0,
    "settings": 1,
    "state": 2,
    "provider": 3,
    # The caller's typed tasks and the checks of a call, which the worker's tasks are built on.
    "session": 4, "caller": 4,
    "engine": 5,
    "fleet": 6, "monitor": 6, "bridge": 6,
    "worker": 7, "celeryconfig": 7,
    "cli": 8, "aio": 8,
    "__init__": 9,
    # Integrations (Scrapy, Playwright): clients of the package, never imported by it.
    "contrib": 9,
    # The MCP server: a client of the package too (its command is named lazily by cli/).
    "mcp": 9,
}  # fmt: skip

#: Imports of Celery or kombu outside worker/ and cli/, with the reason.
CELERY_OUTSIDE_WORKER: dict[str, str] = {
    "captcha_tasks.aio.async_results": "awaits a result: Celery's states and AsyncResult",
}


def _modules() -> Iterator[tuple[str, Path]]:
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).with_suffix("")
        yield ".".join(("captcha_tasks", *rel.parts)).removesuffix(".__init__"), path


def _imports(module: str, path: Path) -> Iterator[tuple[str, bool]]:
    """Absolute names this module imports, and whether only for type checking."""
    tree = ast.parse(path.read_text())
    package = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
    typing_only: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            typing_only.update(id(n) for n in ast.walk(node))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, id(node) in typing_only
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            names = [target] if node.module else [f"{target}.{a.name}" for a in node.names]
            for name in names:
                yield name, id(node) in typing_only


def _layer(module: str) -> int:
    parts = module.split(".")
    if len(parts) > 2 and ".".join(parts[1:3]) in LAYERS:  # a module placed on its own
        return LAYERS[".".join(parts[1:3])]
    top = parts[1] if len(parts) > 1 else "__init__"
    if (
        top not in LAYERS
        and (PACKAGE / f"{top}.py").exists() is False
        and not (PACKAGE / top).is_dir()
    ):
        top = "__init__"  # a name the package root exports (``from .. import app``)
    return LAYERS[top]


def test_every_top_level_module_has_a_layer() -> None:
    for module, _ in _modules():
        _layer(module)  # KeyError names a module the table does not place


def test_no_module_imports_a_higher_layer() -> None:
    upward = []
    for module, path in _modules():
        for name, typing_only in _imports(module, path):
            upward_import = not typing_only and name.startswith("captcha_tasks.")
            if upward_import and _layer(name) > _layer(module):
                upward.append(f"{module} -> {name}")
    assert upward == []


def test_celery_is_imported_only_by_the_worker_package_and_the_cli() -> None:
    found = set()
    for module, path in _modules():
        if module.split(".")[1:2] in (["worker"], ["cli"]):
            continue
        for name, typing_only in _imports(module, path):
            if name.split(".")[0] in ("celery", "kombu") and not typing_only:
                found.add(module)
    assert found == set(CELERY_OUTSIDE_WORKER)


def test_the_runtime_imports_neither_the_sandbox_nor_the_dev_tools() -> None:
    found = [
        f"{module} -> {name}"
        for module, path in _modules()
        for name, _typing_only in _imports(module, path)
        if name.split(".")[0] in ("captcha_tasks_sandbox", "captcha_tasks_dev")
    ]
    assert found == []
    assert not (PACKAGE / "devtools").exists()
