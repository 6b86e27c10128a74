"""``captcha_tasks.tracing``: the context kept with a job, spans parented by it, the SDK
set up from the ``OTEL_*`` variables only when they ask for it, and trace ids in log
records. Spans go to the SDK's in-memory exporter (this process's one tracer provider)."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from typing import Any

import pytest

from captcha_tasks import tracing
from captcha_tasks.errors import CaptchaUnsolvable
from tests.support.otel_spans import memory_exporter

trace = pytest.importorskip("opentelemetry.trace")


@pytest.fixture
def spans() -> Any:
    with memory_exporter() as exporter:
        yield exporter


def test_the_context_kept_with_a_job_parents_the_engines_spans(spans: Any) -> None:
    with tracing.span("admission", kind="consumer") as admission:
        kept = tracing.carrier()
    assert set(json.loads(kept)) == {"traceparent"}
    # Later, in another thread or process: the engine's spans from the job's field.
    with tracing.span("captcha_tasks.submit", parent=kept, kind="client"):
        pass
    tracing.emit("captcha_tasks.wait_for_thread", parent=kept, start=100.0, end=102.5)
    by_name = {s.name: s for s in spans.get_finished_spans()}
    for name in ("captcha_tasks.submit", "captcha_tasks.wait_for_thread"):
        assert by_name[name].parent.span_id == admission.get_span_context().span_id
        assert by_name[name].context.trace_id == admission.get_span_context().trace_id
    wait = by_name["captcha_tasks.wait_for_thread"]
    assert (wait.start_time, wait.end_time) == (100_000_000_000, 102_500_000_000)


def test_a_failure_is_the_spans_status_with_its_type_and_code(spans: Any) -> None:
    tracing.emit(
        "captcha_tasks.result",
        parent=None,
        start=1.0,
        end=1.0,
        error=CaptchaUnsolvable("no luck", "ERROR_CAPTCHA_UNSOLVABLE"),
    )
    (done,) = spans.get_finished_spans()
    assert done.status.status_code == trace.StatusCode.ERROR
    assert done.attributes["error.type"] == "CaptchaUnsolvable"
    assert done.attributes["captcha_tasks.error_code"] == "ERROR_CAPTCHA_UNSOLVABLE"


@pytest.mark.parametrize("kept", ["not json", "[1]", '{"traceparent": "garbage"}'])
def test_a_context_that_says_nothing_is_ignored_not_a_crash(spans: Any, kept: str) -> None:
    with tracing.span("captcha_tasks.submit", parent=kept):
        pass
    tracing.emit("captcha_tasks.result", parent=kept, start=1.0, end=2.0)
    recorded = spans.get_finished_spans()
    assert [s.name for s in recorded] == ["captcha_tasks.submit", "captcha_tasks.result"]
    assert all(s.context.is_valid for s in recorded)


def test_outside_a_span_there_is_no_context_to_keep() -> None:
    assert tracing.carrier() == ""
    assert tracing.current_trace_id() == ""


def test_log_records_carry_the_trace_id_inside_a_span(spans: Any) -> None:
    tracing.install_log_trace_ids()
    logger = logging.getLogger("test_tracing")
    seen: list[logging.LogRecord] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            seen.append(record)

    handler = Keep()
    logger.addHandler(handler)
    try:
        logger.warning("outside")
        with tracing.span("solve") as current:
            logger.warning("inside")
    finally:
        logger.removeHandler(handler)
    trace_id = format(current.get_span_context().trace_id, "032x")
    outside, inside = seen
    assert (outside.trace, outside.otelTraceID) == ("", "0")  # type: ignore[attr-defined]
    assert (inside.trace, inside.otelTraceID) == (f" trace={trace_id}", trace_id)  # type: ignore[attr-defined]


def _setup_in_a_fresh_process(env: dict[str, str]) -> str:
    """What ``setup()`` does in a new process with only ``env``'s OTEL_* variables: the
    tracer provider's class name after it."""
    code = (
        "from captcha_tasks import tracing; from opentelemetry import trace; "
        "print(tracing.setup(), type(trace.get_tracer_provider()).__name__)"
    )
    clean = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    done = subprocess.run(
        [sys.executable, "-c", code],
        env={**clean, **env},
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return done.stdout.strip()


def test_without_an_exporter_named_nothing_is_set_up() -> None:
    assert _setup_in_a_fresh_process({}) == "False ProxyTracerProvider"
    assert _setup_in_a_fresh_process({"OTEL_SERVICE_NAME": "w"}) == "False ProxyTracerProvider"


def test_an_exporter_named_sets_the_sdk_up_unless_disabled() -> None:
    endpoint = {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9"}
    assert _setup_in_a_fresh_process(endpoint) == "True TracerProvider"
    assert _setup_in_a_fresh_process({"OTEL_TRACES_EXPORTER": "console"}) == "True TracerProvider"
    disabled = {**endpoint, "OTEL_SDK_DISABLED": "true"}
    assert _setup_in_a_fresh_process(disabled) == "False ProxyTracerProvider"


def test_a_tasks_control_flow_ends_its_span_as_it_is_and_a_failure_marks_it(
    spans: Any,
) -> None:
    class GoesOn(Exception):
        """As Celery's Ignore of a task that replaced itself."""

    with pytest.raises(GoesOn), tracing.span("replaced", passing=(GoesOn,)):
        raise GoesOn
    with pytest.raises(CaptchaUnsolvable), tracing.span("failed"):
        raise CaptchaUnsolvable("no luck", "ERROR_CAPTCHA_UNSOLVABLE")
    by_name = {s.name: s for s in spans.get_finished_spans()}
    assert by_name["replaced"].status.status_code == trace.StatusCode.UNSET
    assert by_name["failed"].status.status_code == trace.StatusCode.ERROR
    assert by_name["failed"].attributes["captcha_tasks.error_code"] == "ERROR_CAPTCHA_UNSOLVABLE"


def test_with_no_tracer_provider_no_span_is_made_at_all() -> None:
    code = (
        "from captcha_tasks import tracing\n"
        "with tracing.span('s') as made: pass\n"
        "reads = tracing.SpanOfSteps('r')\n"
        "reads.step('t', '', start=1.0, end=2.0, attributes={})\n"
        "print(tracing.enabled(), made, len(reads._open))\n"
    )
    clean = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    done = subprocess.run(
        [sys.executable, "-c", code],
        env=clean,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert done.stdout.split() == ["False", "None", "0"]


def test_a_jobs_reads_are_one_span_whose_arrays_say_when_and_how_many(spans: Any) -> None:
    with tracing.span("admission", kind="consumer"):
        kept = tracing.carrier()
    reads = tracing.SpanOfSteps("captcha_tasks.reads")
    for i, (size, answer) in enumerate([(20, "not_ready"), (1, "not_ready"), (7, "ready")]):
        reads.step(
            "job-1",
            kept,
            start=10.0 + i,
            end=10.25 + i,
            attributes={"captcha_tasks.answer": answer},
            figures={"captcha_tasks.batch_sizes": size},
            final=answer == "ready",
        )
    (read,) = [s for s in spans.get_finished_spans() if s.name == "captcha_tasks.reads"]
    assert read.attributes["captcha_tasks.steps"] == 3
    assert list(read.attributes["captcha_tasks.step_ends_ms"]) == [250, 1250, 2250]
    assert list(read.attributes["captcha_tasks.batch_sizes"]) == [20, 1, 7]
    assert read.attributes["captcha_tasks.answer"] == "ready"
    assert (read.start_time, read.end_time) == (10_000_000_000, 12_250_000_000)
    assert not read.events


def test_a_jobs_steps_not_ended_here_are_a_span_once_flushed(spans: Any) -> None:
    reads = tracing.SpanOfSteps("captcha_tasks.reads")
    reads.step("job-2", "", start=1.0, end=1.5, attributes={}, figures={"f": 1})
    assert not spans.get_finished_spans()  # not its last read yet: nothing made
    tracing.flush()
    (read,) = spans.get_finished_spans()
    assert read.attributes["captcha_tasks.steps"] == 1


def test_a_provider_request_is_on_the_span_that_asked_for_it_without_its_query(
    spans: Any,
) -> None:
    with tracing.span("captcha_tasks.submit", kind="client", http=True):
        tracing.http_reply("https://user:pw@api.example.com/createTask?key=s3cret", 200)
    with tracing.span("other"):
        tracing.http_reply("https://api.example.com/getTaskResult", 500)
    tracing.http_reply("http://[::1]:8080/in.php", 0)  # no span asked: nothing, no error
    with tracing.span("submit to a port", http=True):
        tracing.http_reply("http://[::1]:8080/in.php", 0)  # no answer came
    by_name = {s.name: s for s in spans.get_finished_spans()}
    assert dict(by_name["captcha_tasks.submit"].attributes) == {
        "http.request.method": "POST",
        "server.address": "api.example.com",
        "server.port": 443,
        "url.full": "https://api.example.com/createTask",
        "http.response.status_code": 200,
    }
    assert not by_name["other"].attributes
    assert dict(by_name["submit to a port"].attributes) == {
        "http.request.method": "POST",
        "server.address": "::1",
        "server.port": 8080,
        "url.full": "http://[::1]:8080/in.php",
    }


def test_under_a_context_not_sampled_no_span_is_made(spans: Any) -> None:
    sampled_out = json.dumps({"traceparent": f"00-{'ab' * 16}-{'cd' * 8}-00"})
    sampled_in = json.dumps({"traceparent": f"00-{'ef' * 16}-{'cd' * 8}-01"})
    for kept in (sampled_out, sampled_in):
        with tracing.span("captcha_tasks.submit", parent=kept) as made:
            tracing.emit("captcha_tasks.result", parent=kept, start=1.0, end=1.0)
            tracing.SpanOfSteps("captcha_tasks.reads").step(
                "job", kept, start=1.0, end=1.0, attributes={}, final=True
            )
        assert (made is None) == (kept == sampled_out)
    finished = spans.get_finished_spans()
    assert sorted(s.name for s in finished) == [
        "captcha_tasks.reads",
        "captcha_tasks.result",
        "captcha_tasks.submit",
    ]
    assert {format(s.context.trace_id, "032x") for s in finished} == {"ef" * 16}


class _OwnHeader:
    """A propagator of another format than W3C's (as B3's is), one header of its own."""

    fields = frozenset({"x-own-trace"})

    def inject(self, carrier: Any, context: Any = None, setter: Any = None) -> None:
        found = trace.get_current_span(context).get_span_context()
        carrier["x-own-trace"] = f"{found.trace_id:032x}:{found.span_id:016x}"

    def extract(self, carrier: Any, context: Any = None, getter: Any = None) -> Any:
        from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags

        trace_id, span_id = (int(x, 16) for x in carrier["x-own-trace"].split(":"))
        found = SpanContext(trace_id, span_id, True, TraceFlags(TraceFlags.SAMPLED))
        return trace.set_span_in_context(NonRecordingSpan(found), context)


def test_the_job_keeps_w3c_whatever_propagators_the_messages_use(spans: Any) -> None:
    from opentelemetry import propagate

    before = propagate.get_global_textmap()
    propagate.set_global_textmap(_OwnHeader())  # type: ignore[arg-type]
    try:
        assert tracing.header_names() == ("x-own-trace",)
        headers: dict[str, Any] = {}
        with tracing.span("send", kind="producer") as send:
            tracing.inject_into(headers)
        assert set(headers) == {"x-own-trace"}
        # The worker reads the message's own header, and keeps W3C's in the job.
        with tracing.span("admission", parent=headers, kind="consumer") as admission:
            kept = tracing.carrier()
        assert set(json.loads(kept)) == {"traceparent"}
        tracing.emit("captcha_tasks.result", parent=kept, start=1.0, end=1.0)
    finally:
        propagate.set_global_textmap(before)
    by_name = {s.name: s for s in spans.get_finished_spans()}
    assert by_name["admission"].parent.span_id == send.get_span_context().span_id
    assert by_name["captcha_tasks.result"].parent.span_id == (admission.get_span_context().span_id)
