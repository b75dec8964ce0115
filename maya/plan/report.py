"""What a person reads: the candidates table (rich) and the HTML report (time against cost, Pareto front).

Both read the status object (:mod:`maya.plan.status`), so what is printed is
exactly what ``--json`` and the operator carry.
"""

from __future__ import annotations

import html
import sys
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from maya.plan.spec import human_duration
from maya.summary import device_value_lines

GIB = 2**30
_STYLE = {"ok": "green", "oom": "red", "failed": "magenta", "pruned": "dim"}


def _knobs(c: dict[str, Any]) -> str:
    return " ".join(f"{k}={('on' if v else 'off') if isinstance(v, bool) else v}" for k, v in c["knobs"].items())


def _ms(s: float | None) -> str:
    return "" if s is None else f"{s * 1e3:.1f}"


def _memory(c: dict[str, Any]) -> str:
    peak = c.get("peakMemoryBytes")
    return "" if peak is None else f"{peak / GIB:.1f}/{c['capacityBytes'] / GIB:.0f}"


def describe(c: dict[str, Any]) -> str:
    knobs = _knobs(c)
    return (f"{c['gpusPerNode'] * c['nodes']}x {c['gpu']} ({c['nodes']} node(s)), micro-batch {c['microBatch']} "
            f"x{c['gradientAccumulation']}" + (f", {knobs}" if knobs else ""))


def table(status: dict[str, Any], deadline_steps: int | None) -> Table:
    t = Table(title="Candidates", title_justify="left", show_lines=False)
    for name, just in (("", "left"), ("status", "left"), ("GPU", "left"), ("GPUs", "right"), ("nodes", "right"),
                       ("µbatch", "right"), ("accum", "right"), ("knobs", "left"), ("step ms", "right"),
                       ("range ms", "right"), ("peak/cap GiB", "right"), ("$/step", "right")):
        t.add_column(name, justify=just)  # type: ignore[arg-type]
    if deadline_steps:
        t.add_column(f"{deadline_steps} steps", justify="right")
        t.add_column("cost", justify="right")
    t.add_column("why", justify="left", overflow="fold", max_width=60)
    rec = status.get("recommendation")
    for c in status["candidates"]:
        mark = "★" if rec is not None and _same(c, rec) else ("=" if any(_same(c, x) for x in status["ties"])
                                                              else "")
        row = [mark, c["status"], c["gpu"], str(c["gpusPerNode"] * c["nodes"]), str(c["nodes"]), str(c["microBatch"]),
               str(c["gradientAccumulation"]), _knobs(c), _ms(c["stepTimeSeconds"]),
               (f"{_ms(c['stepTimeSecondsLow'])}-{_ms(c['stepTimeSecondsHigh'])}"
                if c.get("stepTimeSecondsLow") is not None else ""),
               _memory(c), "" if c["costPerStepUSD"] is None else f"{c['costPerStepUSD']:.5f}"]
        if deadline_steps:
            secs = c.get("deadlineSeconds")
            late = c.get("meetsDeadline") is False
            row += ["" if secs is None else human_duration(secs) + (" (late)" if late else ""),
                    "" if c.get("deadlineCostUSD") is None else f"${c['deadlineCostUSD']:.2f}"]
        row.append(c.get("reason", "") or ("tied with the recommendation" if mark == "=" else ""))
        t.add_row(*row, style=_STYLE.get(c["status"], ""))
    return t


def _same(a: dict[str, Any], b: dict[str, Any]) -> bool:
    keys = ("gpu", "gpusPerNode", "nodes", "microBatch", "knobs")
    return all(a.get(k) == b.get(k) for k in keys)


def print_report(status: dict[str, Any], deadline_steps: int | None, console: Console | None = None) -> None:
    # Piped or in CI, rich would fold the table to 80 columns.
    console = console or Console(width=None if sys.stdout.isatty() else 220, highlight=False)
    console.print(table(status, deadline_steps))
    em = status["emulations"]
    console.print(f"search: {status['search']}; {status['searchedCandidates']} candidates, emulations: "
                  f"{em.get('ran', 0)} run, {em.get('reused', 0)} reused, {em.get('failed', 0)} failed")
    rec, up = status.get("recommendation"), status.get("runnerUp")
    if rec is None:
        cond = next(c for c in status["conditions"] if c["type"] == "Recommended")
        console.print(f"[bold red]no recommendation[/]: {cond['message']}")
        return
    console.print(f"[bold green]recommended[/]: {describe(rec)}: {_ms(rec['stepTimeSeconds'])} ms per step, "
                  f"${rec['costPerStepUSD']:.5f} per step")
    if len(runs := rec.get("emulationsStepTimeSeconds") or []) > 1:
        console.print(f"  the median of {len(runs)} emulations (its step follows its host): "
                      + ", ".join(f"{_ms(s)}" for s in runs) + " ms", markup=False)
    if aside := rec.get("emulationsSlowPhaseStepTimeSeconds"):
        console.print(f"  set aside {len(aside)} emulation(s) made in a slow phase of the emulating CPU: "
                      + ", ".join(f"{_ms(s)}" for s in aside) + " ms", markup=False)
    if over := rec.get("paceOverUsual"):
        console.print(f"  note: every emulation ran in a slow phase of the emulating CPU (Python at {over:.2f} "
                      "times its usual pace): the step may be long; plan again later", markup=False)
    for line in device_value_lines(rec.get("deviceValues")):
        console.print(f"  {line}", markup=False)
    if up is not None:
        dt = up["stepTimeSeconds"] / rec["stepTimeSeconds"] - 1
        dc = up["costPerStepUSD"] / rec["costPerStepUSD"] - 1
        console.print(f"runner-up: {describe(up)}: {dt:+.1%} time, {dc:+.1%} cost")
    if status.get("ties"):
        console.print("tied within the prediction's uncertainty (cheapest chosen): "
                      + "; ".join(describe(t) for t in status["ties"]))


def pareto(points: list[tuple[float, float]]) -> list[int]:
    """Indexes of the points no other point beats in both time and cost."""
    front = []
    for i, (t, c) in enumerate(points):
        if not any((t2 <= t and c2 <= c) and (t2 < t or c2 < c) for t2, c2 in points):
            front.append(i)
    return front


def write_html(path: Path, name: str, status: dict[str, Any], timeline: str | None) -> None:
    ok = [c for c in status["candidates"] if c["status"] == "ok" and c["stepTimeSeconds"]]
    rec = status.get("recommendation")
    pts = [(c["stepTimeSeconds"], c["costPerStepUSD"]) for c in ok]
    front = set(pareto(pts))
    w, h, pad = 720, 420, 60
    svg = [f'<svg width="{w}" height="{h}" xmlns="http://www.w3.org/2000/svg" font-family="sans-serif" '
           'font-size="11">']
    if pts:
        t0, t1 = min(p[0] for p in pts), max(p[0] for p in pts)
        c0, c1 = min(p[1] for p in pts), max(p[1] for p in pts)
        t1, c1 = (t1 if t1 > t0 else t0 * 1.1 + 1e-9), (c1 if c1 > c0 else c0 * 1.1 + 1e-12)

        def xy(t: float, c: float) -> tuple[float, float]:
            return pad + (t - t0) / (t1 - t0) * (w - 2 * pad), h - pad - (c - c0) / (c1 - c0) * (h - 2 * pad)

        svg.append(f'<line x1="{pad}" y1="{h - pad}" x2="{w - pad}" y2="{h - pad}" stroke="black"/>')
        svg.append(f'<line x1="{pad}" y1="{pad}" x2="{pad}" y2="{h - pad}" stroke="black"/>')
        svg.append(f'<text x="{w / 2}" y="{h - 15}" text-anchor="middle">step time (ms): {t0 * 1e3:.1f} to '
                   f'{t1 * 1e3:.1f}</text>')
        svg.append(f'<text x="15" y="{h / 2}" transform="rotate(-90 15 {h / 2})" text-anchor="middle">cost per step '
                   f'(USD): {c0:.5f} to {c1:.5f}</text>')
        line = sorted(xy(*pts[i]) for i in front)
        if len(line) > 1:
            svg.append('<polyline fill="none" stroke="#2a7" stroke-dasharray="4 3" points="'
                       + " ".join(f"{x:.1f},{y:.1f}" for x, y in line) + '"/>')
        for i, c in enumerate(ok):
            x, y = xy(*pts[i])
            is_rec = rec is not None and _same(c, rec)
            color = "#d22" if is_rec else ("#2a7" if i in front else "#888")
            r = 7 if is_rec else 4
            svg.append(f'<circle cx="{x:.1f}" cy="{y:.1f}" r="{r}" fill="{color}"><title>'
                       f'{html.escape(describe(c))}: {c["stepTimeSeconds"] * 1e3:.1f} ms, '
                       f'${c["costPerStepUSD"]:.5f}</title></circle>')
    svg.append("</svg>")
    rows = "".join(
        "<tr>" + "".join(f"<td>{html.escape(str(v))}</td>" for v in (
            c["status"], c["gpu"], c["gpusPerNode"] * c["nodes"], c["microBatch"], c["gradientAccumulation"],
            _knobs(c), _ms(c["stepTimeSeconds"]), _memory(c),
            "" if c["costPerStepUSD"] is None else f"{c['costPerStepUSD']:.5f}", c.get("reason", ""))) + "</tr>"
        for c in status["candidates"])
    head = "".join(f"<th>{x}</th>" for x in ("status", "GPU", "GPUs", "micro-batch", "accumulation", "knobs",
                                              "step ms", "peak/capacity GiB", "USD/step", "why"))
    rec_text = describe(rec) if rec else "none: " + next(
        c["message"] for c in status["conditions"] if c["type"] == "Recommended")
    link = f'<p>Timeline of the recommendation: <a href="{timeline}">{timeline}</a> (open in ui.perfetto.dev)</p>' \
        if timeline else ""
    path.write_text(
        f"<!doctype html><html><head><meta charset='utf-8'><title>maya plan {html.escape(name)}</title>"
        "<style>body{font-family:sans-serif;margin:2em}td,th{padding:2px 8px;border-bottom:1px solid #ddd}</style>"
        f"</head><body><h1>maya plan: {html.escape(name)}</h1><p><b>Recommended:</b> {html.escape(rec_text)}</p>"
        "<p>Step time against cost per step of every candidate that fits: the recommendation in red, the Pareto "
        f"front in green.</p>{''.join(svg)}{link}<table><tr>{head}</tr>{rows}</table>"
        f"<p>search: {html.escape(status['search'])}</p></body></html>\n")
