"""Nanoseconds the interposer spends per intercepted kernel launch.

Builds benchmarks/launch_overhead.c against emulation-image/build/libmaya.so,
runs it with tracing on (the full cost: lookup, record, buffered write), and
saves the figures under benchmarks/results/.
"""

from __future__ import annotations

import datetime
import json
import os
import platform
import re
import subprocess
import sys
import tempfile
from pathlib import Path

from maya.catalog import spec_string

ROOT = Path(__file__).resolve().parent.parent
BUILD = ROOT / "emulation-image" / "build"


def include_flags() -> list[str]:
    import nvidia  # the cu13 wheel that torch installs carries the headers

    base = Path(nvidia.__path__[0])
    import triton

    crt = Path(triton.__file__).parent / "backends" / "nvidia" / "include"
    compat = ROOT / "emulation-image" / "compat"
    return [f"-I{base / 'cu13' / 'include'}", "-idirafter", str(crt), "-idirafter", str(compat)]


def main() -> int:
    launches = int(sys.argv[1]) if len(sys.argv) > 1 else 1_000_000
    with tempfile.TemporaryDirectory() as tmp:
        exe = Path(tmp) / "launch_overhead"
        subprocess.run(
            ["gcc", "-O2", *include_flags(), str(ROOT / "benchmarks" / "launch_overhead.c"),
             "-o", str(exe), f"-L{BUILD}", "-lmaya", f"-Wl,-rpath,{BUILD}"],
            check=True,
        )
        env = dict(os.environ, MAYA_GPU_SPEC=spec_string("H100-SXM-80GB"), MAYA_TRACE_DIR=tmp)
        out = subprocess.run([str(exe), str(launches)], env=env, check=True, capture_output=True, text=True).stdout
        trace_bytes = (Path(tmp) / "rank0.mayatrace").stat().st_size
    print(out, end="")
    reps = [float(x) for x in re.findall(r"rep \d+: ([\d.]+) ns", out)]
    reps.sort()
    result = {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "machine": f"{platform.node()} {platform.machine()} {os.cpu_count()} cpus",
        "command": f"python benchmarks/launch_overhead.py {launches}",
        "launches_per_rep": launches,
        "ns_per_launch_median": reps[len(reps) // 2],
        "ns_per_launch_best": reps[0],
        "trace_bytes_per_launch": trace_bytes / (5 * launches),
    }
    print(f"median {result['ns_per_launch_median']:.1f} ns per launch, "
          f"{result['trace_bytes_per_launch']:.1f} trace bytes per launch")
    out_dir = ROOT / "benchmarks" / "results"
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "launch_overhead.json").write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
