"""Watching a running cluster: ``captcha-tasks watch`` (a live results collector fed by
Celery task events, :mod:`.watch`) and ``captcha-tasks status`` (one snapshot of the
thread budget, queues, pools, proxies, locks, workers and balance, :mod:`.status`)."""
