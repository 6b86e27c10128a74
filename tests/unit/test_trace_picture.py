"""The monitoring guide's trace picture is drawn from spans as the receiver decodes them."""

from __future__ import annotations

from pathlib import Path

import pytest

from captcha_tasks_dev.otlp_receiver import ReceivedSpan

pytest.importorskip("matplotlib")


def _span(name: str, span_id: str, parent: str, start: float, end: float, who: str) -> ReceivedSpan:
    return ReceivedSpan(
        name=name,
        trace_id="t" * 32,
        span_id=span_id,
        parent_id=parent,
        kind="internal",
        start_ns=int(start * 1e9),
        end_ns=int(end * 1e9),
        status=0,
        status_message="",
        attributes={"captcha_tasks.answer": "ready"} if name.endswith("read") else {},
        resource={"service.instance.id": who},
    )


def test_a_trace_is_drawn_to_a_png(tmp_path: Path) -> None:
    from captcha_tasks_dev.trace_picture import draw_trace

    spans = [
        _span("process captcha_tasks.solve_recaptcha_v2", "a1", "", 0.0, 0.01, "a"),
        _span("captcha_tasks.submit", "a2", "a1", 0.02, 0.05, "a"),
        _span("captcha_tasks.read", "b1", "a1", 2.0, 2.02, "b"),
        _span("captcha_tasks.result", "b2", "a1", 2.03, 2.03, "b"),
    ]
    path = tmp_path / "trace.png"
    draw_trace(spans, path)
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
