"""The JSON task API's ``task`` object of a ``createTask`` (docs/PROVIDERS.md §3, §4):
its ``type`` from the dialect's task names, the fields each captcha class declares for
that dialect (``json_fields``), and the proxy's.

:func:`task_for` refuses, with :class:`~captcha_tasks.errors.InvalidTaskInput` naming
the provider, a captcha type (or a proxied variant) the dialect does not offer, so
nothing is sent for it. Unset options are left out, not sent as ``null``.
"""

from __future__ import annotations

from typing import Any

from .captchas import Captcha, Coordinates, Grid, Image
from .json_dialects import JsonDialect
from .kind import Task
from .offers import check_offered, json_names
from .proxy import Proxy

__all__ = ["proxy_fields", "task_for"]


def task_for(dialect: JsonDialect, captcha: Captcha, proxy: Proxy | None = None) -> Task:
    """The ``task`` of a createTask for ``captcha`` (through ``proxy`` if given)."""
    # An image is read from its bytes: a proxy has nothing to load, so none is sent.
    if isinstance(captcha, Image | Coordinates | Grid):
        proxy = None
    check_offered(dialect.name, captcha, proxied=proxy is not None)
    names = json_names(dialect, captcha)
    assert names is not None  # check_offered refused it otherwise
    name = names.proxyless if proxy is None else names.proxy
    task: Task = {"type": name}
    task.update(captcha.json_fields(dialect.name))
    if proxy is not None:
        task.update(proxy_fields(dialect, proxy))
    return {name: value for name, value in task.items() if value is not None}


def proxy_fields(dialect: JsonDialect, proxy: Proxy) -> dict[str, Any]:
    """The proxy as ``dialect`` takes it (the only place the password goes)."""
    kind = proxy.type.lower()
    if dialect.proxy_encoding == "string":
        auth = f":{proxy.username}:{proxy.password}" if proxy.username is not None else ""
        return {"proxy": f"{kind}:{proxy.host}:{proxy.port}{auth}"}
    return {
        "proxyType": kind,
        "proxyAddress": proxy.host,
        "proxyPort": proxy.port,
        "proxyLogin": proxy.username,
        "proxyPassword": proxy.password,
    }
