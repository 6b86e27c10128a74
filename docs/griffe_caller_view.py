"""The documentation site's griffe extension (mkdocstrings' ``extensions:`` in mkdocs.yml):
the tasks as their callers see them.

- A task's function is bound (``bind=True``): its first parameter, ``self``, is the task,
  which no caller passes. The signature on the page starts after it.
- Docstrings are written for Python's own tools, with reST roles (``:func:`x```,
  ``:class:`~a.B```) and double backquotes; on the page they become markdown code.

It needs griffe (the docs tools of the ``[dev]`` extra), so it lives with the pages, not
in the package, whose every module imports with the runtime dependencies alone.
"""

from __future__ import annotations

import re
from typing import Any

import griffe

__all__ = ["CallerView", "as_markdown"]

_ROLE = re.compile(r":(?:data|mod|class|meth|func|attr|exc|obj):`(~?)([^`]+)`")


def _code(role: re.Match[str]) -> str:
    target = role[2]
    return f"`{target.rsplit('.', 1)[-1] if role[1] else target}`"


def as_markdown(text: str) -> str:
    """reST-flavoured docstring text as markdown: roles (``~a.B``: ``B``, as Sphinx shows
    it) and ````x```` to ```x```."""
    return _ROLE.sub(_code, text).replace("``", "`")


class CallerView(griffe.Extension):
    """Module-level functions whose first parameter is ``self`` (bound tasks) lose it;
    every docstring of the package reads as markdown."""

    def on_function_instance(self, *, func: griffe.Function, **kwargs: Any) -> None:
        if func.parent is not None and func.parent.is_module:
            parameters = func.parameters
            if len(parameters) and parameters[0].name == "self":
                del parameters[0]

    def on_instance(self, *, obj: griffe.Object, **kwargs: Any) -> None:
        if obj.docstring is not None:
            obj.docstring.value = as_markdown(obj.docstring.value)
