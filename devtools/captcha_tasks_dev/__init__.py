"""This repository's development tools (the ``captcha-tasks-dev`` distribution, never in
the runtime wheel): the supervisor behind ``make run`` (``run``, ``procs``, ``signals``),
a local redis-server and Sentinel, the benchmarks (``bench/``), ``make compat``'s driver,
the documentation hooks and ``make screenshot``. The solver sandbox is a distribution of
its own, ``captcha_tasks_sandbox``.

The test suite starts its processes through the same supervisor.
"""
