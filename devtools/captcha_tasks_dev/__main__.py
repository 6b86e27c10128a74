"""``python -m captcha_tasks_dev``: the ``captcha-tasks-dev`` command."""

from .cli import run

run()
