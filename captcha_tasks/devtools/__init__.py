"""Local development helpers: a redis-server and a process supervisor for ``make run``.

Also used by the test suite, so tests and ``make run`` start processes the same way.
"""
