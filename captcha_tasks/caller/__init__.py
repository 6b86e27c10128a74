"""The caller's side: what application code runs to send a task, check it and await it.

- :mod:`.typed`: the tasks as the type checker sees them (``.delay()`` takes the task's
  own parameters, ``.get()`` gives its result type);
- :mod:`.checks`: the checks a call passes before anything is sent;
- :mod:`.awaiting` and :mod:`.async_results`: :mod:`captcha_tasks.aio`'s sending and
  waiting, one pub/sub connection per event loop; :mod:`.aio_kinds`: each captcha kind's
  ``aio`` function, generated from its declaration.

The worker's side (tasks, bootsteps, the Celery seam) is :mod:`captcha_tasks.worker`.
"""
