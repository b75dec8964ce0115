"""``maya trace diff``: how two traces of the same script differ, operation by operation.

The question it answers before profile data is trusted: does the emulation
launch what the GPU launched?  :func:`diff` aligns the two traces
(``align.py``) and counts what matched, what matched with every field equal,
which fields differ where they do not, and what only one side ran.  When a
side was recorded on a GPU (it has ``DEVICE_TIME`` records), it also says how
much of the measured device time the matched operations cover: the part of
the recording that profile tables can use.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

from maya.predictor.trace import records as R
from maya.predictor.trace.align import Pair, align_traces
from maya.predictor.trace.format import Kind
from maya.predictor.trace.ops import Op, differing_fields, measured
from maya.predictor.trace.reader import Trace, TraceError, read_trace


def _display_names(*traces: Trace) -> dict[str, str]:
    """Mangled kernel name -> readable name (FUNC records carry both)."""
    out: dict[str, str] = {}
    for t in traces:
        for r in t.records[t.of_kind(Kind.FUNC)]:
            mangled = t.strings.get(int(R.FUNC_MANGLED.of(r["a"])), "")
            readable = t.strings.get(int(R.FUNC_DEMANGLED.of(r["a"])), "")
            if readable and readable != mangled:
                out[mangled] = readable.removeprefix("void ")
    return out


def _label(op: Op, names: dict[str, str]) -> str:
    text = op.label() if op.kind != Kind.KERNEL else f"KERNEL {names.get(op.name, op.name)}"
    return text if len(text) <= 100 else text[:97] + "..."


def _value(op: Op, field: str) -> Any:
    if field.startswith("a") and field[1:].isdigit():
        return op.a[int(field[1:])]
    value = getattr(op, field)
    return list(value) if isinstance(value, tuple) else value


def _runs(pairs: list[Pair], side: str, names: dict[str, str], limit: int) -> tuple[int, list[dict[str, Any]]]:
    """Maximal stretches of operations only ``side`` ('a' or 'b') has: how many, and the first ``limit``."""
    runs: list[list[Pair]] = []
    mine, theirs = (1, 2) if side == "a" else (2, 1)  # Pair fields: thread, a, b, ...
    open_run, thread = False, None
    for p in pairs:
        if p[0] != thread:
            open_run, thread = False, p[0]
        if p[mine] is None:
            continue  # the other side's own operations do not interrupt a run
        if p[theirs] is None:
            if not open_run:
                runs.append([])
                open_run = True
            runs[-1].append(p)
        else:
            open_run = False
    shown = []
    for run in runs[:limit]:
        ops = [getattr(p, f"op_{side}") for p in run]
        shown.append(
            {
                "thread": run[0].thread,
                "first": getattr(run[0], side),
                "last": getattr(run[-1], side),
                "n": len(run),
                "ops": [_label(op, names) for op in ops[:3]],
            }
        )
    return len(runs), shown


def _read(path: str | Path) -> Trace:
    try:
        return read_trace(path)
    except TraceError as e:
        raise TraceError(f"{path}: {e}") from None


def diff(path_a: str | Path, path_b: str | Path, limit: int = 10) -> dict[str, Any]:
    """The comparison of two trace files, as a JSON-able dict.

    Raises ``OSError`` or ``TraceError`` for a file that cannot be read."""
    traces = {"a": _read(path_a), "b": _read(path_b)}
    pairs = align_traces(traces["a"], traces["b"])
    names = _display_names(*traces.values())

    threads: dict[str, list[int]] = {}  # name -> [A ops, B ops, matched]
    matched: dict[str, set[int]] = {"a": set(), "b": set()}
    differing: list[tuple[Pair, Op, Op]] = []
    equal: dict[tuple[int, int], bool] = {}
    for p in pairs:
        counts = threads.setdefault(p.thread, [0, 0, 0])
        counts[0] += p.a is not None
        counts[1] += p.b is not None
        if p.op_a is not None and p.op_b is not None and p.a is not None and p.b is not None:
            counts[2] += 1
            matched["a"].add(p.a)
            matched["b"].add(p.b)
            key = (id(p.op_a), id(p.op_b))  # device_ops shares Op objects: compare each couple once
            if key not in equal:
                equal[key] = p.op_a == p.op_b
            if not equal[key]:
                differing.append((p, p.op_a, p.op_b))
    total = {"a": sum(c[0] for c in threads.values()), "b": sum(c[1] for c in threads.values())}
    n_matched = len(matched["a"])

    report: dict[str, Any] = {}
    for side, path in (("a", path_a), ("b", path_b)):
        t = traces[side]
        report[side] = {"path": str(path), "gpu": t.header["gpu_name"], "rank": t.header["rank"], "ops": total[side]}
    report["matched"] = n_matched
    report["identical"] = n_matched - len(differing)
    report["differing"] = len(differing)
    fields = [differing_fields(x, y) for _, x, y in differing]
    report["differing_fields"] = dict(Counter(" ".join(f) for f in fields).most_common())
    report["first_differing"] = [
        {
            "thread": p.thread,
            "a": p.a,
            "b": p.b,
            "op": _label(x, names),
            "fields": {f: [_value(x, f), _value(y, f)] for f in fs},
        }
        for (p, x, y), fs in zip(differing[:limit], fields, strict=False)
    ]
    for side in ("a", "b"):
        report[f"{side}_only"] = total[side] - n_matched
        report[f"{side}_only_runs"], report[f"first_{side}_only_runs"] = _runs(pairs, side, names, limit)
    report["measured"] = {}
    for side in ("a", "b"):
        times = measured(traces[side])
        if times:
            mine = [m for i, m in times.items() if i in matched[side]]
            report["measured"][side] = {
                "busy_ns": sum(m.busy_ns for m in times.values()),
                "matched_busy_ns": sum(m.busy_ns for m in mine),
                "ops": len(times),
                "matched_ops": len(mine),
            }
    report["threads"] = {name: {"a": c[0], "b": c[1], "matched": c[2]} for name, c in threads.items()}
    return report


def render(report: dict[str, Any]) -> list[str]:
    """The report as printed lines."""
    lines = []
    for side in ("a", "b"):
        r = report[side]
        note = ", measured" if side in report["measured"] else ""
        lines.append(f"{side.upper()}  {r['path']}  ({r['gpu']}, rank {r['rank']}): {r['ops']} device operations{note}")
    lines.append(
        f"matched   {report['matched']}  (identical {report['identical']}, differing fields {report['differing']})"
    )
    for side in ("a", "b"):
        lines.append(f"{side.upper()} only    {report[f'{side}_only']}  in {report[f'{side}_only_runs']} runs")
    if len(report["threads"]) > 1:
        for name, c in report["threads"].items():
            lines.append(f"  thread {name}: A {c['a']}, B {c['b']}, matched {c['matched']}")
    for side, m in report["measured"].items():
        share = m["matched_busy_ns"] / m["busy_ns"] if m["busy_ns"] else 0.0
        lines.append(
            f"measured ({side.upper()}): {m['busy_ns'] / 1e6:.3f} ms device busy over {m['ops']} operations; "
            f"matched operations cover {share:.1%} ({m['matched_ops']} operations)"
        )
    if report["differing_fields"]:
        lines.append("differing fields (operations: fields):")
        lines += [f"  {n:6}  {fields}" for fields, n in report["differing_fields"].items()]
        lines.append("first differing operations (record indices A/B):")
        for d in report["first_differing"]:
            values = "; ".join(f"{f} {_short(va)} | {_short(vb)}" for f, (va, vb) in d["fields"].items())
            lines.append(f"  {d['a']}/{d['b']}  {d['op']}: {values}")
    for side in ("a", "b"):
        runs = report[f"first_{side}_only_runs"]
        if runs:
            lines.append(f"first runs only in {side.upper()} (record indices):")
            for r in runs:
                more = ", ..." if r["n"] > len(r["ops"]) else ""
                lines.append(f"  {r['first']}..{r['last']} ({r['n']}, {r['thread']}): {', '.join(r['ops'])}{more}")
    return lines


def _short(value: Any) -> str:
    text = str(value)
    return text if len(text) <= 60 else text[:57] + "..."
