"""Protocol fidelity: the official 2captcha-python client against the sandbox over TLS,
and ``captcha-tasks-sandbox`` as a real process."""

from __future__ import annotations

import os
import re
import selectors
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import requests
from twocaptcha import TwoCaptcha

from captcha_tasks_sandbox import DEV_API_KEY, SandboxServer, image_answer

pytestmark = pytest.mark.integration

GOOGLEKEY = "6LeIxAcTAAAAAJcZVRqyHh71UMIEGNQ_MXjiZKhI"
PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 2


def test_official_client_solves_recaptcha_v2_through_the_sandbox(
    tls_sandbox: SandboxServer,
) -> None:
    assert tls_sandbox.url.startswith("https://127.0.0.1:")
    # pollingInterval is truncated to int by the client: 1 s is the smallest real pause.
    solver = TwoCaptcha(
        DEV_API_KEY,
        server=f"127.0.0.1:{tls_sandbox.port}",
        pollingInterval=1,
        recaptchaTimeout=30,
    )
    result = solver.recaptcha(sitekey=GOOGLEKEY, url="https://shop.example.com/login")
    token = result["code"]
    assert token.startswith("03AFcWeA")
    assert result["captchaId"].isdigit()

    with requests.Session() as session:
        verify = f"{tls_sandbox.url}/siteverify"
        first = session.post(verify, data={"secret": "s", "response": token}, timeout=5).json()
        assert first["success"] is True
        assert first["hostname"] == "shop.example.com"
        second = session.post(verify, data={"secret": "s", "response": token}, timeout=5).json()
        assert second == {"success": False, "error-codes": ["timeout-or-duplicate"]}

    assert solver.report(result["captchaId"], True) == "OK_REPORT_RECORDED"
    assert solver.balance() == 100.0
    stats = tls_sandbox.stats()
    assert stats["submitted"] == stats["solved"] == 1
    assert stats["polls"] >= 2
    assert stats["reports_good"] == 1
    assert stats["bad_key"] == 0


def test_official_client_uploads_an_image_file(tls_sandbox: SandboxServer, tmp_path: Path) -> None:
    image = tmp_path / "captcha.png"
    image.write_bytes(PNG)
    solver = TwoCaptcha(
        DEV_API_KEY, server=f"127.0.0.1:{tls_sandbox.port}", pollingInterval=1, defaultTimeout=30
    )
    result = solver.normal(str(image), numeric=1)
    assert result["code"] == image_answer(PNG, {"numeric": "1"})
    assert tls_sandbox.stats()["by_type"]["image"] == 1


def _read_line(proc: subprocess.Popen[str], timeout: float) -> str:
    assert proc.stdout is not None
    with selectors.DefaultSelector() as selector:
        selector.register(proc.stdout, selectors.EVENT_READ)
        if not selector.select(timeout):
            raise AssertionError(f"no output from the sandbox within {timeout} s")
    return proc.stdout.readline()


CLI = [
    sys.executable,
    "-c",
    "from captcha_tasks_sandbox.cli import sandbox_command; sandbox_command()",
]


@pytest.mark.parametrize(
    ("stop_signal", "scale_from_env"), [(signal.SIGTERM, False), (signal.SIGINT, True)]
)
def test_cli_serves_until_signalled(stop_signal: signal.Signals, scale_from_env: bool) -> None:
    argv = [*CLI, "--port", "0", "--threads", "7", "--latency", "image=1", "--seed", "3"]
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "CAPTCHA_TASKS_TIME_SCALE": "0.01"}
    if not scale_from_env:
        env["CAPTCHA_TASKS_TIME_SCALE"] = "0.5"
        argv += ["--time-scale", "0.01"]
    with subprocess.Popen(
        argv,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    ) as proc:
        try:
            line = _read_line(proc, timeout=30)
            match = re.fullmatch(
                rf"sandbox listening on (http://127\.0\.0\.1:\d+) \(key {DEV_API_KEY}\)\n", line
            )
            assert match, line
            url = match[1]
            with requests.Session() as session:
                stats = session.get(f"{url}/stats", timeout=5).json()
                assert (stats["threads"], stats["time_scale"], stats["submitted"]) == (7, 0.01, 0)
                params = {"key": DEV_API_KEY, "action": "getbalance"}
                assert session.get(f"{url}/res.php", params=params, timeout=5).text == "100.0000"
            started = time.monotonic()
            proc.send_signal(stop_signal)
            assert proc.wait(timeout=10) == 0
            assert time.monotonic() - started < 5
            _, stderr = proc.communicate(timeout=5)
            assert DEV_API_KEY not in stderr
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait(timeout=5)


def test_cli_reports_bad_settings_and_options() -> None:
    env = {**os.environ, "CAPTCHA_TASKS_TIME_SCALE": "fast"}
    bad_env = subprocess.run(
        [*CLI, "--port", "0"], env=env, capture_output=True, text=True, timeout=30, check=False
    )
    assert bad_env.returncode == 1
    assert "CAPTCHA_TASKS_TIME_SCALE" in bad_env.stderr
    bad_option = subprocess.run(
        [*CLI, "--port", "0", "--time-scale", "1", "--latency", "keycaptcha=3"],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert bad_option.returncode == 2
    assert "KIND=SECONDS" in bad_option.stderr
