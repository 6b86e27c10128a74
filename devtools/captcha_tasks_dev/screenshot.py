"""``make screenshot``: Flower's task list, one task's page and ``captcha-tasks status``,
as PNG files.

Starts the dev stack (Redis if needed, the sandbox and its demo site, a worker,
Flower with basic auth), runs a mixed run (solves, an image, a challenged page fetch,
one bad input), then renders Flower's tasks page, the page fetch's task page and the
status output in headless Chromium (Debian's ``chromium``). Everything it started is
stopped by PID at the end.
"""

from __future__ import annotations

import base64
import html
import shutil
import struct
import subprocess
import sys
import tempfile
import time
import zlib
from pathlib import Path

from captcha_tasks.settings import get_settings

from .run import DEV_TIME_SCALE, DevOptions, DevStack, _say

__all__ = ["shoot_flower", "take_screenshots"]

CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--hide-scrollbars",
]


def _chromium() -> str:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        found = shutil.which(name)
        if found:
            return found
    raise RuntimeError(
        "no Chromium found: install Debian's package (apt-get install chromium) and run again"
    )


def _shoot(browser: str, url: str, out: Path, size: str = "1400,900") -> None:
    with tempfile.TemporaryDirectory(prefix="captcha-tasks-chromium-") as profile:
        subprocess.run(
            [
                browser,
                *CHROMIUM_FLAGS,
                f"--user-data-dir={profile}",
                f"--window-size={size}",
                "--virtual-time-budget=8000",
                f"--screenshot={out}",
                url,
            ],
            check=True,
            capture_output=True,
            timeout=120,
        )
    _say(f"screenshot: {out}")


def shoot_flower(flower_url: str, auth: str, out_dir: Path, *, task_id: str) -> None:
    """Flower's task list (``flower-tasks.png``) and ``task_id``'s page (``flower-task.png``)."""
    browser = _chromium()
    out_dir.mkdir(parents=True, exist_ok=True)
    host = flower_url.split("//", 1)[1]
    _shoot(browser, f"http://{auth}@{host}/tasks", out_dir / "flower-tasks.png")
    task_page = f"http://{auth}@{host}/task/{task_id}"
    _shoot(browser, task_page, out_dir / "flower-task.png", "1400,1300")


def take_screenshots(out_dir: Path) -> int:
    browser = _chromium()
    out_dir.mkdir(parents=True, exist_ok=True)
    options = DevOptions(
        time_scale=DEV_TIME_SCALE, sandbox_port=0, flower_port=0, demo_port=0, smoke=True
    )
    stack = DevStack(options, get_settings())
    try:
        stack.start_redis()
        stack.start_sandbox()
        stack.start_workers()
        flower_url, auth = stack.start_flower()
        stack.smoke()
        waited_most = _some_tasks(stack)
        time.sleep(1.0)  # let Flower take in the last events
        shoot_flower(flower_url, auth, out_dir, task_id=waited_most)
        _some_load(stack)
        time.sleep(0.5)
        _shoot_status(browser, stack, out_dir)
        return 0
    finally:
        stack.stop()


def _image() -> str:
    """A valid 1x1 PNG, base64, made past the providers' 100-byte floor by a comment."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        crc = struct.pack(">I", zlib.crc32(kind + data))
        return struct.pack(">I", len(data)) + kind + data + crc

    png = b"".join(
        [
            b"\x89PNG\r\n\x1a\n",
            chunk(b"IHDR", struct.pack(">IIBBBBB", 1, 1, 8, 6, 0, 0, 0)),
            chunk(b"tEXt", b"Comment\x00" + b"p" * 200),
            chunk(b"IDAT", zlib.compress(b"\x00\x00\x00\x00\x00")),
            chunk(b"IEND", b""),
        ]
    )
    return base64.b64encode(png).decode()


def _some_tasks(stack: DevStack) -> str:
    """A mixed run to its end: solves, an image, a challenged page fetch (an isolated
    visitor, so challenged after the smoke test's solve; with a form secret Flower must
    not show), one bad input. Returns the id of the solve that waited longest for a
    thread."""
    control = stack._control_app()
    try:
        demo = stack.env["CAPTCHA_TASKS_ALLOWED_DOMAINS"].split(",")[-1]
        pending = [
            control.send_task(
                "captcha_tasks.solve_recaptcha_v2",
                args=("6Le-wvkSAAAAAPBMRTvw0Q4Muexq9bi0DJwx_mJ-", f"https://example.com/{i}"),
            )
            for i in range(3)
        ]
        pending.append(control.send_task("captcha_tasks.solve_image", args=(_image(),)))
        page = control.send_task(
            "captcha_tasks.fetch_page",
            args=(f"http://{demo}/page/2",),
            kwargs={"form": {"password": "not-shown-in-flower"}, "isolated": True},
        )
        # Sent by name, so only the worker checks it: it fails there.
        bad = control.send_task("captcha_tasks.solve_recaptcha_v2", args=("", "https://e.com"))
        waited = {str(r.id): r.get(timeout=120)["queued_seconds"] for r in pending}
        page.get(timeout=120)
        bad.get(timeout=120, propagate=False)
        return max(waited, key=waited.__getitem__)
    finally:
        control.close()


def _some_load(stack: DevStack) -> None:
    """Some load, so the status shows a budget in use, a queue and a pool filling."""
    busy = stack._control_app()
    try:
        for i in range(20):
            busy.send_task(
                "captcha_tasks.solve_recaptcha_v2",
                args=("6Le-wvkSAAAAAPBMRTvw0Q4Muexq9bi0DJwx_mJ-", f"https://example.com/b{i}"),
            )
        busy.send_task(
            "captcha_tasks.fill_token_pool",
            args=(
                "recaptcha_v2",
                "6Le-wvkSAAAAAPBMRTvw0Q4Muexq9bi0DJwx_mJ-",
                "https://example.com/login",
            ),
            kwargs={"target": 3},
        ).get(timeout=60)
    finally:
        busy.close()


def _shoot_status(browser: str, stack: DevStack, out_dir: Path) -> None:
    """``captcha-tasks status`` against the stack, rendered as a terminal would show it."""
    status = subprocess.run(
        [sys.executable, "-m", "captcha_tasks.cli.main", "status"],
        env=stack.env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    page = out_dir / "status.html"
    page.write_text(
        "<html><body style='background:#1e1e1e;color:#ddd;margin:16px'>"
        "<pre style='font:14px monospace'>$ captcha-tasks status\n"
        f"{html.escape(status.stdout or status.stderr)}</pre></body></html>",
        encoding="utf-8",
    )
    _shoot(browser, page.resolve().as_uri(), out_dir / "status.png", size="1100,700")
    page.unlink()
