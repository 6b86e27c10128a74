"""Loaded into a test worker with ``--include tests.support.otel_celery``: OpenTelemetry's
stock Celery instrumentation on, as an application turns it on in its worker (the SDK
from the ``OTEL_*`` variables first, then the instrumentor, before the pool forks)."""

from opentelemetry.instrumentation.celery import CeleryInstrumentor

from captcha_tasks import tracing

tracing.setup()
CeleryInstrumentor().instrument()  # type: ignore[no-untyped-call]
