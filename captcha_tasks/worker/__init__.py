"""Everything Celery: the app and its configuration, the task base classes, the tasks,
the worker's bootsteps and remote-control commands, the broker transport and result
backend. The plain modules beside this package know nothing of Celery."""
