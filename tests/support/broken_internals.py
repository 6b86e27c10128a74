"""``python -m tests.support.broken_internals NAME [celery arguments...]``: Celery's
command line, in a process where the seam's assumption ``NAME`` has been broken on
purpose first, the way an upstream release that renamed an internal would break it.

Only what the seam relies on is removed; Celery's own code keeps working (it bound
what it needs when it was imported), so the worker runs Celery's public path.
"""

from __future__ import annotations

import sys
from collections.abc import Callable


def _break_celery_strategy() -> None:
    # Celery's request module binds task_ready at import; the seam looks it up on
    # celery.worker.state, where a release that renamed it would leave nothing.
    import celery.worker.request
    import celery.worker.state

    del celery.worker.state.task_ready


BREAKERS: dict[str, Callable[[], None]] = {"celery-strategy": _break_celery_strategy}


def main() -> None:
    name, *argv = sys.argv[1:]
    BREAKERS[name]()
    from celery.__main__ import main as celery_main

    sys.argv = ["celery", *argv]
    celery_main()


if __name__ == "__main__":
    main()
