"""Whether the emulating CPU runs Python slower in phases, and whether C code slows with it.

Times, in one process pinned to one CPU, three yardsticks one after the other
for ``--seconds``: the start-up hook's Python yardstick
(``maya/_hook/_maya_pace.py``), and two loops of C that Python merely calls
(``zlib.crc32``, a table walk that streams the buffer through the L2
cache, and ``hashlib.sha256``, the CPU's SHA instructions, over 256 KB), each
by the thread's CPU time.  Over windows of ``--window`` rounds, each yardstick's median is
divided by its quickest window's: a CPU whose Python runs slower for seconds
at a time shows windows near 1 and windows well above, and whether the C
loops follow says whether a yardstick of C (the interposer's) could stand for
the job's Python.  Also reads ``/proc/stat``'s steal time of that CPU.  Saves
``benchmarks/results/python_phases.json``.

    python -m benchmarks.python_phases [--seconds 40] [--cpu 0]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import time
import zlib
from pathlib import Path
from statistics import median

from maya._hook import _maya_pace

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results" / "python_phases.json"
BLOB = os.urandom(256 * 1024)
YARDSTICKS = {
    "python": lambda: _maya_pace._chunk(),
    "crc32": lambda: zlib.crc32(BLOB),
    "sha256": lambda: hashlib.sha256(BLOB).digest(),
}


def steal_ticks(cpu: int) -> int:
    for line in Path("/proc/stat").read_text().splitlines():
        if line.startswith(f"cpu{cpu} "):
            return int(line.split()[8])
    return 0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=float, default=40.0)
    ap.add_argument("--cpu", type=int, default=0)
    ap.add_argument("--window", type=int, default=50, help="rounds per window (a round: each yardstick once)")
    ap.add_argument("--save", type=Path, default=RESULTS)
    args = ap.parse_args()
    os.sched_setaffinity(0, {args.cpu})
    _maya_pace._chunk()
    times: dict[str, list[int]] = {name: [] for name in YARDSTICKS}
    steal0, end = steal_ticks(args.cpu), time.monotonic() + args.seconds
    while time.monotonic() < end:
        for name, run in YARDSTICKS.items():
            t = time.thread_time_ns()
            run()
            times[name].append(time.thread_time_ns() - t)
    steal = steal_ticks(args.cpu) - steal0
    n = len(times["python"]) // args.window
    windows = {name: [median(v[i * args.window:(i + 1) * args.window]) for i in range(n)] for name, v in times.items()}
    ratios = {name: [w / min(ws) for w in ws] for name, ws in windows.items()}
    slow = [i for i, r in enumerate(ratios["python"]) if r > 1.25]
    calm = [i for i in range(n) if i not in slow]
    summary = {
        "windows": n, "python_slow_windows": len(slow),
        "python_slowest": max(ratios["python"]),
        **{f"{name}_in_python_slow_windows": median([ratios[name][i] for i in slow]) if slow else None
           for name in YARDSTICKS},
        **{f"{name}_in_other_windows": median([ratios[name][i] for i in calm]) if calm else None
           for name in YARDSTICKS},
        "steal_ticks": steal,
    }
    print(f"{n} windows of {args.window} rounds over {args.seconds:.0f} s on CPU {args.cpu}; steal {steal} ticks")
    print(f"Python yardstick: {len(slow)} windows over 1.25 x its quickest (slowest {summary['python_slowest']:.2f})")
    for name in YARDSTICKS:
        a, b = summary[f"{name}_in_python_slow_windows"], summary[f"{name}_in_other_windows"]
        print(f"  {name:7} median x quickest: {a if a is None else round(a, 2)} in those windows, "
              f"{b if b is None else round(b, 2)} in the others")
    out = {"date": time.strftime("%Y-%m-%d"), "command": f"python -m benchmarks.python_phases --seconds "
           f"{args.seconds:g} --cpu {args.cpu} --window {args.window}", "cpu": platform.processor() or platform.machine(),
           "cpus": os.cpu_count(), "summary": summary, "ratios": {k: [round(x, 3) for x in v] for k, v in ratios.items()}}
    args.save.parent.mkdir(parents=True, exist_ok=True)
    args.save.write_text(json.dumps(out, indent=1) + "\n")
    print(f"saved {args.save}")


if __name__ == "__main__":
    main()
