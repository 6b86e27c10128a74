"""The seam: every place captcha_tasks relies on a private name or an internal module of
Celery, kombu or redis-py, and nothing else.

Outside this package the code uses their public API only; ``tests/unit/
test_celery_seam.py`` reads the package's source and fails on a private name, an
internal module, an override of a private method or a monkeypatch anywhere else.

Inside, each touch point says in its docstring what it relies on, why the public API
does not do it, and which upstream issue or release would let it go. What it relies
on is one named assumption of :mod:`.contracts`, checked once per process before it is
used: where it does not hold, the touch point takes the public path and says so once
(:func:`.contracts.holds`). :mod:`.versions` says at worker start when Celery, kombu or
redis-py is outside the tested ranges.

- :mod:`.broker`: kombu's Redis transport, a task message recorded as unacknowledged
  when it is published (``kombu-redis-publish``, ``kombu-registries``), a purge that
  ends the waiting solves too (``kombu-redis-purge``), and the broker entry of
  ``inspect stats`` without secrets (``celery-connection-info``);
- :mod:`.revoke`: Celery's ``revoke`` handed to the engines (``celery-revoke-command``);
- :mod:`.admit_inline`: solves admitted in the worker's consumer (``celery-strategy``);
- :mod:`.result_backend`: a final state stays final; ``get()`` returns at once
  (``celery-redis-backend``);
- :mod:`.request`: a worker's request shows redacted arguments
  (``celery-request-reprs``);
- :mod:`.results`: a stored meta turned into ``get()``'s answer (``celery-result-cache``);
- :mod:`.tracer`: no return values in Celery's log, a short record of ``Ignore``
  (``celery-log-success``, ``celery-exception-info``);
- :mod:`.amqp`: ``task-sent`` under the name the task is sent as (``celery-sent-event``);
- :mod:`.consumer_log`: the consumer's lost-broker lines handed to the worker's one
  outage report (``celery-consumer-log``);
- :mod:`.completion`: the tracer's success path, run by the solve engine (public API
  only: here because it mirrors what the tracer does).
"""
