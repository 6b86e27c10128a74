"""The caller's side of a task that is not :mod:`captcha_tasks.aio`: the tasks as the
type checker sees them (:mod:`.typed`: ``.delay()`` takes the task's own parameters,
``.get()`` gives its result type) and the checks a call passes before anything is sent
(:mod:`.checks`). The worker's tasks are built on both; ``aio``'s sending and awaiting
sit above the worker's app. The worker's side (tasks, bootsteps, the Celery seam) is
:mod:`captcha_tasks.worker`.
"""
