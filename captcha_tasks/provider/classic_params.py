"""in.php's encoding of the captcha types and of the proxy, for the classic provider.

Each captcha class declares its own in.php parameters (``classic_params``); this module
sends them as in.php takes them: the form parameters of a submit (without ``key`` and
``json``, which :class:`~captcha_tasks.provider.classic.SolverClient` adds), the multipart
upload of an image, and the proxy fields.
"""

from __future__ import annotations

from .captchas import Captcha, Coordinates, Image
from .proxy import Proxy

__all__ = ["Files", "proxy_params", "submit_files", "submit_params"]

#: Multipart uploads as requests takes them: field name -> (file name, content, mime type).
Files = dict[str, tuple[str, bytes, str]]


def submit_params(captcha: Captcha) -> dict[str, str]:
    """in.php's parameters for ``captcha`` (``method`` and its fields, as its class
    declares them; unset options left out)."""
    return {name: value for name, value in captcha.classic_params().items() if value is not None}


def submit_files(captcha: Captcha) -> Files | None:
    """The multipart upload to send with :func:`submit_params`: only an :class:`Image`
    or :class:`Coordinates` with ``multipart`` set (``method=post``) has one."""
    if not isinstance(captcha, Image | Coordinates) or not captcha.multipart:
        return None
    extension, mime = captcha.kind
    # A fixed name with the right extension: the provider checks it, and local
    # file names have no business leaving the machine.
    return {"file": (f"captcha.{extension}", captcha.body, mime)}


def proxy_params(proxy: Proxy) -> dict[str, str]:
    """``proxy`` and ``proxytype`` for in.php (the only place the password goes)."""
    auth = f"{proxy.username}:{proxy.password}@" if proxy.username is not None else ""
    return {"proxy": f"{auth}{proxy.address}", "proxytype": proxy.type}
