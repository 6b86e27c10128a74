"""Variants of captcha_tasks' own design side by side, each on a fresh Redis, sandbox
and workers in one invocation:

- ``captcha-tasks-dev bench solve --callbacks``: the same solves collected by polls (the
  default, no callback URL) and by callbacks the sandbox pushes, with and without
  dropped callbacks. What it shows: provider reads per solve, the collection delay
  (answer ready at the sandbox -> result stored, p50/p95) and solves lost. Every worker
  of a run listens on one callback port (SO_REUSEPORT), as workers of one host do in
  production.
- ``captcha-tasks-dev bench solve --traces``: the same solves with OpenTelemetry's SDK
  off (no tracer provider set up: no span is made) and on (every span exported over
  OTLP/HTTP to a receiver the run holds, as to a collector; the ``OTEL_*`` variables of
  the run's environment, a sampler's say, apply), both at the same time, twice. What it
  shows: worker CPU per solve, and throughput, each way; spans, and attributes per solve.
"""

from __future__ import annotations

import dataclasses
import json
import os
import secrets
import shutil
import socket
import subprocess
import sys
import time
from functools import partial
from pathlib import Path
from typing import Any

from captcha_tasks.errors import CaptchaTasksError

from .solve import BenchOptions, Progress, _ours, _run_design
from .stack import Processes

__all__ = ["format_callback_report", "run_callback_bench"]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _designs(opts: BenchOptions, drop_rate: float, mode: str = "callbacks") -> list[Any]:
    if mode == "traces":
        return _traced_designs(opts)
    polls = dataclasses.replace(_ours(opts), name="polls", label="polls only")
    token = secrets.token_hex(24)

    def pushed(name: str, label: str, drop: float) -> Any:
        port = _free_port()
        env = {
            "CAPTCHA_TASKS_CALLBACK_URL": f"http://127.0.0.1:{port}/cb",
            "CAPTCHA_TASKS_CALLBACK_TOKEN": token,
            "CAPTCHA_TASKS_CALLBACK_PORT": str(port),
        }
        args = ("--callback-drop-rate", repr(drop)) if drop else ()
        ours = _ours(opts)
        options = {"env": {**ours.more.get("env", {}), **env}, "sandbox_args": args}
        return dataclasses.replace(ours, name=name, label=label, more=options)

    designs = [polls, pushed("callbacks", "callbacks", 0.0)]
    if drop_rate > 0:
        label = f"callbacks, {drop_rate:.0%} dropped"
        designs.append(pushed("callbacks_dropped", label, drop_rate))
    return designs


def _traced_designs(opts: BenchOptions) -> list[Any]:
    ours = _ours(opts)
    off = dataclasses.replace(ours, name="untraced", label="tracing off")
    env = {
        **ours.more.get("env", {}),
        "OTEL_EXPORTER_OTLP_ENDPOINT": "",  # the receiver's, once _run_one has started it
        "OTEL_SERVICE_NAME": "captcha-tasks-bench",
    }
    more = {**ours.more, "env": env}
    return [off, dataclasses.replace(ours, name="traced", label="tracing on", more=more)]


def run_callback_bench(
    opts: BenchOptions,
    say: Progress | None = None,
    *,
    drop_rate: float = 0.2,
    mode: str = "callbacks",
    rounds: int = 2,
) -> dict[str, Any]:
    """Run the designs (``mode`` ``callbacks``: polls, callbacks, callbacks with
    ``drop_rate`` dropped, in turn; ``traces``: tracing off and on at the same time,
    ``rounds`` times), each in a fresh Python process (``captcha_tasks.app`` is
    configured once per process) that stops every process it started, on errors too.

    Traced and untraced run at once, each on its own Redis, sandbox and workers, so
    that what else the machine does in those seconds weighs on both alike: run one
    after the other, the same design's CPU per solve differs by up to a fifth between
    runs on a shared machine, more than tracing costs."""
    say = say or (lambda message: None)
    started = time.monotonic()
    names = [d.name for d in _designs(opts, drop_rate, mode)]
    fields = {f.name: getattr(opts, f.name) for f in dataclasses.fields(opts)}
    fields["log_dir"] = None if opts.log_dir is None else str(opts.log_dir)

    def start(name: str) -> subprocess.Popen[str]:
        argv = [sys.executable, "-m", __name__, json.dumps([name, fields, drop_rate, mode])]
        return subprocess.Popen(argv, stdout=subprocess.PIPE, text=True)

    def finish(name: str, run: subprocess.Popen[str]) -> tuple[str, dict[str, Any]]:
        out, _ = run.communicate()
        if run.returncode != 0:
            raise CaptchaTasksError(f"the {name} run failed (exit {run.returncode})")
        label, metrics = json.loads(out.strip().splitlines()[-1])
        say(f"{label}: done")
        return label, metrics

    designs: dict[str, dict[str, Any]] = {}
    if mode == "traces":
        for round_ in range(1, rounds + 1):
            runs = {name: start(name) for name in names}
            try:
                for name, run in runs.items():
                    label, metrics = finish(name, run)
                    designs[f"{name}_{round_}"] = {
                        "label": f"{label} ({round_})",
                        "round": round_,
                        **metrics,
                    }
            finally:
                for run in runs.values():
                    if run.poll() is None:
                        run.terminate()
                        run.wait(timeout=60)
    else:
        for name in names:
            label, metrics = finish(name, start(name))
            designs[name] = {"label": label, **metrics}
    parameters = {
        "threads": opts.threads,
        "latency": opts.latency,
        "jitter": opts.jitter,
        "solves": opts.solves,
        "workers": opts.workers,
        "provider": opts.provider,
        "time_scale": round(opts.time_scale, 6),
        "drop_rate": drop_rate,
        "mode": mode,
        "rounds": rounds if mode == "traces" else 1,
        "cpus": os.cpu_count(),
    }
    return {
        "parameters": parameters,
        "wall_seconds": round(time.monotonic() - started, 1),
        "designs": designs,
    }


def _run_one(
    name: str, fields: dict[str, Any], drop_rate: float, mode: str
) -> tuple[str, dict[str, Any]]:
    """One design's run in this (fresh) process: its label and metrics."""
    if fields.get("log_dir"):
        fields["log_dir"] = Path(fields["log_dir"])
    opts = BenchOptions(**fields)
    design = next(d for d in _designs(opts, drop_rate, mode) if d.name == name)
    procs = Processes.logging_to(opts.log_dir, f"captcha-tasks-bench-{name}-")
    succeeded = False
    receiver = None

    def say(message: str) -> None:
        print(f"[bench] {message}", file=sys.stderr, flush=True)

    env = design.more.get("env", {})
    if "OTEL_EXPORTER_OTLP_ENDPOINT" in env:
        from ..otlp_receiver import OtlpReceiver

        receiver = OtlpReceiver().start()
        more = {**design.more, "env": {**env, "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.url}}
        design = dataclasses.replace(design, more=more)
    try:
        (run,) = procs.run_each([partial(_run_design, design, opts, say=say)])
        succeeded = True
        if receiver is not None:
            spans = receiver.spans
            done = max(1, int(run.metrics.get("completed") or 0))
            run.metrics["spans_exported"] = len(spans)
            run.metrics["span_events_per_solve"] = round(
                sum(len(s.events) for s in spans) / done, 2
            )
            attributes = sum(
                len(s.attributes) + sum(len(e["attributes"]) for e in s.events) for s in spans
            )
            run.metrics["span_attributes_per_solve"] = round(attributes / done, 1)
    finally:
        if receiver is not None:
            receiver.stop()
        if opts.log_dir is None and succeeded:
            shutil.rmtree(procs.log_dir, ignore_errors=True)
        elif not succeeded:
            say(f"logs kept in {procs.log_dir}")
    return run.label, run.metrics


#: (label, metric, format) of each row.
_ROWS: tuple[tuple[str, str, str], ...] = (
    ("solves completed", "completed", "{}"),
    ("lost (failed or unfinished)", "lost", "{}"),
    ("submits per task", "submits_per_task", "{}"),
    ("provider reads per solve", "polls_per_solve", "{}"),
    ("collection delay p50 (s)", "collection_delay_p50", "{}"),
    ("collection delay p95 (s)", "collection_delay_p95", "{}"),
    ("throughput / (T/L)", "fraction_of_t_over_l", "{}"),
    ("makespan (s)", "makespan_seconds", "{}"),
    ("max in flight", "max_in_flight", "{}"),
    ("worker CPU per solve (s)", "worker_cpu_per_solve", "{}"),
    ("spans exported", "spans_exported", "{}"),
    ("span events per solve", "span_events_per_solve", "{}"),
    ("attributes per solve", "span_attributes_per_solve", "{}"),
)


def format_callback_report(report: dict[str, Any]) -> str:
    """The designs side by side, one row per figure."""
    p = report["parameters"]
    designs = list(report["designs"].values())
    for d in designs:
        d["lost"] = int(d.get("failures") or 0) + int(d.get("unfinished") or 0)
    width = max(len(d["label"]) for d in designs) + 2
    lines = [
        f"bench solve --{p.get('mode', 'callbacks')}: T={p['threads']}, L={p['latency']} s, "
        f"{p['solves']} solves, {p['workers']} workers, provider {p['provider']}, "
        f"time scale {p['time_scale']}, {p['cpus']} CPUs, {report['wall_seconds']} s",
        "figure".ljust(30) + "".join(d["label"].rjust(width) for d in designs),
    ]
    for label, key, fmt in _ROWS:
        cells = ["-" if d.get(key) is None else fmt.format(d[key]) for d in designs]
        lines.append(label.ljust(30) + "".join(c.rjust(width) for c in cells))
    if p.get("mode") == "traces":
        lines.append(_traced_over_untraced(report["designs"]))
    return "\n".join(lines)


def _traced_over_untraced(designs: dict[str, dict[str, Any]]) -> str:
    """Worker CPU per solve traced over untraced: each round's (the two ran at the same
    time), and all rounds' (CPU seconds over solves, summed)."""
    rounds = sorted({d["round"] for d in designs.values()})
    ratios = []
    summed = {"untraced": [0.0, 0], "traced": [0.0, 0]}
    for round_ in rounds:
        per_solve = {}
        for name in summed:
            d = designs[f"{name}_{round_}"]
            per_solve[name] = d["worker_cpu_per_solve"]
            summed[name][0] += d["worker_cpu_seconds"]
            summed[name][1] += d["completed"]
        ratios.append(f"round {round_} {per_solve['traced'] / per_solve['untraced']:.3f}")
    whole = {name: cpu / max(1, done) for name, (cpu, done) in summed.items()}
    return (
        "worker CPU per solve, tracing on / off (whole runs, each round's two at once): "
        f"{', '.join(ratios)}; all rounds {whole['traced'] / whole['untraced']:.3f}"
    )


if __name__ == "__main__":
    _name, _fields, _drop, _mode = json.loads(sys.argv[1])
    print(json.dumps(_run_one(_name, _fields, _drop, _mode)))
