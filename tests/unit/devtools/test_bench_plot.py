"""The benchmark's throughput series and its plot."""

from __future__ import annotations

from pathlib import Path

from captcha_tasks_dev.bench.plot import completion_series, write_plot


def test_completions_are_counted_per_bin_from_the_first_enqueue() -> None:
    assert completion_series([], 100.0, 1.0) == []
    assert completion_series([100.2, 100.9, 102.5, 99.0], 100.0, 1.0) == [3, 0, 1]


def test_the_plot_is_a_png_of_every_design(tmp_path: Path) -> None:
    report = {
        "parameters": {"threads": 10, "latency": 2.0, "solves": 8, "provider": "captchaai"},
        "designs": {
            "ours": {
                "label": "captcha_tasks",
                "series_seconds": 1.0,
                "completions_series": [0, 4, 5, 4],
            },
            "seeds": {"label": "seeds", "series_seconds": 1.0, "completions_series": [0, 1]},
        },
    }
    out = tmp_path / "plots" / "throughput.png"
    write_plot(report, out)
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert out.stat().st_size > 5_000
