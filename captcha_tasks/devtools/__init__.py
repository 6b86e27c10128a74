"""Developer tools, never imported by the runtime (the CLI loads them only for their own
commands): the solver sandbox (``sandbox/``), the benchmarks (``bench/``), the
supervisor behind ``make run`` (``run``, ``procs``, ``signals``), a local redis-server
and ``make screenshot``.

The test suite starts its processes through the same supervisor.
"""
