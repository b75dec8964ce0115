"""Recorded against emulated host delays, operation by operation: where the host model misprices a job.

    .venv/bin/python -m benchmarks.held_out.host_gaps RECORDED EMULATED [EMULATED...] [--gpu G] [--steps N]

RECORDED is a ``maya record`` folder of a command (``rank0.mayatrace``, or a
``.tar.xz`` packed by ``benchmarks/archives.py``); each EMULATED is a ``maya
emulate`` folder of the same command.  Rank 0's device operations are aligned
thread by thread (:func:`maya.predictor.trace.align.align_traces`); between two
consecutive aligned operations of a thread, inside each of the last N steps
(between device synchronisations), the host's own time is the span less the
durations of the calls in it: on the server as recorded, and under emulation
(the delay the replay multiplies by ``slowdown``, times the node factor and the rank wait for several
ranks).  Prints, per thread, the sum
and the recorded / emulated ratio by size of the emulated delay, then the
delays of 100 us and more that recur in every step, each with what the host
model charges for it (that factor x the emulated delay).

Caveat: record mode subscribes to every runtime and driver API callback, so
the recorded delays include its own cost for each CUDA call the trace does not
keep (events, device queries): short delays between operations read long.  A
long delay has few such calls, so its recorded time is close to the server's.

For diagnosis only (docs in ``benchmarks/data/held_out/README.md``): nothing is
fitted here, and held-out records must never be fitted on.
"""

from __future__ import annotations

import argparse
import collections
import tempfile
from pathlib import Path

import numpy as np

from benchmarks.archives import extract_all
from maya.predict import rank_traces
from maya.predictor.replay.host import host_model
from maya.predictor.trace import Kind, Trace, read_trace
from maya.predictor.trace.align import align_traces

BINS_US = (0, 3, 5, 10, 20, 50, 200, float("inf"))


def _step_windows(trace: Trace, steps: int) -> list[tuple[int, int]]:
    """(first, last) record index of each of the last ``steps`` spans between device synchronisations
    that hold a training step (over 1 ms of host time: a loop that synchronises at both ends of a step has a short
    span between two steps)."""
    s = trace.of_kind(Kind.DEVICE_SYNC)
    t = trace.records["t_ns"].astype(np.float64)
    released = t + trace.records["dur_ns"]
    spans = [(int(a), int(b)) for a, b in zip(s[:-1], s[1:], strict=True)]
    return [(a, b) for a, b in spans if t[b] - released[a] > 1e6][-steps:]


def transitions(recorded: Trace, emulated: Trace, steps: int) -> list[tuple[str, float, float, str, str]]:
    """(thread, recorded host ns, emulated host ns, operation before, operation after) of every pair of
    consecutive aligned operations of a thread inside the last ``steps`` steps."""
    rr, re_ = recorded.records, emulated.records
    wr, we = _step_windows(recorded, steps), _step_windows(emulated, steps)
    n = min(len(wr), len(we))
    wr, we = wr[len(wr) - n:], we[len(we) - n:]
    pairs = [p for p in align_traces(emulated, recorded) if p.a is not None and p.b is not None]
    out = []
    for (ra, rb), (ea, eb) in zip(wr, we, strict=True):
        by_thread = collections.defaultdict(list)
        for p in pairs:
            if ra < p.b < rb and ea < p.a < eb:
                by_thread[p.thread].append(p)
        for thread, ps in by_thread.items():
            for prev, cur in zip(ps[:-1], ps[1:], strict=False):
                sel = np.arange(prev.b, cur.b)
                sel = sel[(rr["thread"][sel] == rr["thread"][cur.b]) & (rr["kind"][sel] != Kind.DEVICE_TIME)]
                rec = float(rr["t_ns"][cur.b]) - float(rr["t_ns"][prev.b]) - float(rr["dur_ns"][sel].sum())
                sel = np.arange(prev.a, cur.a)
                sel = sel[re_["thread"][sel] == re_["thread"][cur.a]]
                emu = float(re_["t_ns"][cur.a]) - float(re_["t_ns"][prev.a]) - float(re_["dur_ns"][sel].sum())
                out.append((thread, rec, emu, prev.op_b.name if prev.op_b else "", cur.op_b.name if cur.op_b else ""))
    return out


def _load(path: Path, scratch: Path) -> Path:
    if path.name.endswith(".tar.xz"):
        extract_all(path.parent, scratch, (path.name,))
        return next(p.parent for p in scratch.rglob("rank0.mayatrace"))
    return path


def report(rows: list[tuple[str, float, float, str, str]], steps: int, slowdown: float) -> list[str]:
    lines = []
    # a main thread's span over a blocking call (loss.backward() waiting for the autograd thread) is no host work
    rows = [r for r in rows if r[1] < 5e6]
    for thread in sorted({r[0] for r in rows}):
        x = np.array([(r[1], r[2]) for r in rows if r[0] == thread])
        lines.append(f"{thread}: {len(x) / steps:.0f} delays a step, recorded {x[:, 0].sum() / steps / 1e6:.2f} ms, "
                     f"emulated {x[:, 1].sum() / steps / 1e6:.2f} ms (x delay factor {slowdown:.2f}: "
                     f"{slowdown * x[:, 1].sum() / steps / 1e6:.2f} ms)")
        for lo, hi in zip(BINS_US[:-1], BINS_US[1:], strict=True):
            s = (x[:, 1] >= lo * 1e3) & (x[:, 1] < hi * 1e3)
            if s.any():
                lines.append(f"  emulated {lo:>4}-{hi:<4} us: {s.sum() / steps:6.1f} a step, emulated "
                             f"{x[s, 1].sum() / steps / 1e6:6.2f} ms, recorded {x[s, 0].sum() / steps / 1e6:6.2f} ms, "
                             f"ratio {x[s, 0].sum() / max(x[s, 1].sum(), 1.0):5.2f}")
    lines.append("delays of 100 us and more under emulation, in every step (medians, us):")
    recurring = collections.defaultdict(list)
    for thread, rec, emu, before, after in rows:
        if emu >= 100e3:
            recurring[(thread, before[:40], after[:40])].append((rec, emu))
    for (thread, before, after), v in sorted(recurring.items(), key=lambda kv: -np.median([e for _, e in kv[1]])):
        if len(v) >= steps:
            a = np.array(v)
            emu, rec = float(np.median(a[:, 1])), float(np.median(a[:, 0]))
            lines.append(f"  {thread[:13]:13} x{len(v) / steps:.0f} emulated {emu / 1e3:6.0f} recorded {rec / 1e3:6.0f} "
                         f"model {slowdown * emu / 1e3:6.0f}  {before} -> {after}")
    return lines


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("recorded", type=Path)
    ap.add_argument("emulated", type=Path, nargs="+")
    ap.add_argument("--gpu", default="H100-SXM-80GB")
    ap.add_argument("--steps", type=int, default=4, help="last steps compared (default 4)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        recorded = read_trace(_load(args.recorded, Path(scratch)) / "rank0.mayatrace")
        rows: list[tuple[str, float, float, str, str]] = []
        steps = 0
        for folder in args.emulated:
            traces = rank_traces(folder)
            rows += transitions(recorded, traces[0], args.steps)
            steps += args.steps
    host = host_model(args.gpu, ranks=len(traces))
    print("\n".join(report(rows, steps, host.delay_factor)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
