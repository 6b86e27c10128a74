"""``python -m captcha_tasks_sandbox``: the ``captcha-tasks-sandbox`` command."""

from .cli import run

run()
