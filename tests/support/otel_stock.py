"""Loaded into a test worker with ``--include tests.support.otel_stock``: OpenTelemetry's
stock instrumentations on, as an application turns them on in its worker (the SDK from
the ``OTEL_*`` variables first, then the instrumentors, before the pool forks): Celery's,
redis-py's, urllib3's (the provider calls) and requests' (page fetches)."""

from opentelemetry.instrumentation.celery import CeleryInstrumentor
from opentelemetry.instrumentation.redis import RedisInstrumentor
from opentelemetry.instrumentation.requests import RequestsInstrumentor
from opentelemetry.instrumentation.urllib3 import URLLib3Instrumentor

from captcha_tasks import tracing

tracing.setup()
CeleryInstrumentor().instrument()  # type: ignore[no-untyped-call]
RedisInstrumentor().instrument()  # type: ignore[no-untyped-call]
URLLib3Instrumentor().instrument()  # type: ignore[no-untyped-call]
RequestsInstrumentor().instrument()  # type: ignore[no-untyped-call]
