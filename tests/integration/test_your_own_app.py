"""The guide "Your own Celery app" (docs/guides/own-celery-app.md), run as written.

Your application lives in a directory of its own with Celery's tutorial layout: a
``celeryconfig.py`` of its own (pickle, early acks, its own default queue) that must
neither take over captcha_tasks' app nor be taken over by it. A real captcha_tasks
worker and a real worker of your app run; a client process in your directory calls
our task with ``.delay()``, by name with ``send_task``, and chains our solve into
your task.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from captcha_tasks_dev.procs import stop_process, wait_until
from tests.support.workers import ROOT, worker_env

pytestmark = pytest.mark.integration

TURNSTILE_KEY = "0x4AAAAAAABkMYinukE8nzY"

YOUR_CONFIG = """\
import os

broker_url = os.environ["MYAPP_REDIS_URL"]
result_backend = os.environ["MYAPP_REDIS_URL"]
task_serializer = "pickle"
# What your worker takes: our results come in JSON (and Celery refuses to run a worker
# that accepts pickle as root).
accept_content = ["json"]
task_acks_late = False
task_default_queue = "myapp"
"""

YOUR_APP = '''\
import os

import redis
from celery import Celery

app = Celery("myapp")
app.config_from_object("celeryconfig")


@app.task(name="myapp.record_token")
def record_token(result):
    """Your task, run by your worker with our solve's result."""
    redis.Redis.from_url(os.environ["MYAPP_REDIS_URL"]).set("myapp:token", result["solution"])
    return {"stored": len(result["solution"]), "type": result["type"]}
'''

YOUR_CLIENT = """\
import json

from captcha_tasks import app as captcha_app, solve_turnstile
from myapp import app, record_token

page = "https://example.com/login"
out = {"our_conf": [captcha_app.conf.task_serializer, captcha_app.conf.task_acks_late],
       "your_conf": [app.conf.task_serializer, app.conf.task_acks_late]}

# 1. .delay() on the imported task: it goes through captcha_tasks' own app.
out["delay"] = solve_turnstile.delay(KEY, page).get(timeout=60)["type"]

# 2. By name, from your app: to our queue, in JSON (our workers accept nothing else).
sent = app.send_task("captcha_tasks.solve_turnstile", args=(KEY, page), queue="celery",
                     serializer="json")
out["send_task"] = captcha_app.AsyncResult(sent.id).get(timeout=60)["type"]

# 3. Our solve chained into your task (on your queue, run by your worker).
chained = (solve_turnstile.s(KEY, page) | record_token.s().set(queue="myapp")).delay()
out["chain"] = chained.get(timeout=60)
print(json.dumps(out))
"""


def test_your_app_calls_and_chains_our_tasks(
    tmp_path: Path, redis_url: str, sandbox: Any, worker_factory: Any
) -> None:
    import redis

    (tmp_path / "celeryconfig.py").write_text(YOUR_CONFIG)
    (tmp_path / "myapp.py").write_text(YOUR_APP)
    (tmp_path / "client.py").write_text(YOUR_CLIENT.replace("KEY", repr(TURNSTILE_KEY)))
    ours = worker_env(sandbox.url)
    worker_factory(ours)
    env = {k: v for k, v in os.environ.items() if not k.startswith("CELERY")}
    env.update(ours, MYAPP_REDIS_URL=redis_url, PYTHONPATH=str(ROOT), PYTHONUNBUFFERED="1")
    log_path = tmp_path / "myapp-worker.log"
    with log_path.open("wb") as log:
        yours = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "celery",
                "-A",
                "myapp",
                "worker",
                "-Q",
                "myapp",
                "-P",
                "solo",
                "-n",
                "myapp@127.0.0.1",
                "--without-gossip",
                "--without-mingle",
                "-l",
                "INFO",
            ],
            cwd=tmp_path,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        wait_until(
            lambda: " ready." in log_path.read_text(errors="replace"),
            timeout=60,
            interval=0.1,
            what="your worker",
        )
        done = subprocess.run(
            [sys.executable, "client.py"],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=180,
            check=False,
        )
        assert done.returncode == 0, done.stderr + log_path.read_text(errors="replace")
        out = json.loads(done.stdout.strip().splitlines()[-1])
    finally:
        stop_process(yours, timeout=20, group=True)
    # Neither configuration took over the other.
    assert out["our_conf"] == ["json", True]
    assert out["your_conf"] == ["pickle", False]
    assert out["delay"] == out["send_task"] == "turnstile"
    token = redis.Redis.from_url(redis_url).get("myapp:token")
    assert token and out["chain"] == {"stored": len(token), "type": "turnstile"}
    assert "myapp.record_token" in log_path.read_text(errors="replace")
