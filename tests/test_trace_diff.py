"""``maya trace diff A B`` (maya.predictor.trace.diff) and ``maya trace FILE``.

Covers:
- text and --json reports of an emulated and a recorded hand-built trace:
  operations per side, matched, identical, the fields that differ (DNN named
  by API on the recorded side), runs only one side has, the share of the
  measured device time the matched operations cover; --limit;
- a missing file or a file that is not a trace: a one-line error naming it,
  exit 2, no traceback; wrong argument counts print the usage;
- ``maya trace FILE`` still prints header and record counts;
- a small real script emulated twice: every operation matches, fields equal.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from emulated import requires_library, run_emulated
from test_ops import COPY, SDPA_KERNEL, SGEMM, Spec, build


def maya(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "maya.cli", *map(str, args)], capture_output=True, text=True,
                          timeout=120)


def _pair(tmp_path: Path) -> tuple[Path, Path]:
    common = [
        Spec("kernel", COPY, times=[(1000, 1100, COPY)]),
        Spec("dnn", size=256, times=[(2000, 2050, "memset"), (2100, 2500, SDPA_KERNEL)]),
        Spec("blas", "cublasGemmEx", 128, [(3000, 3400, SGEMM)]),
    ]
    emulated = [*common, Spec("kernel", "_Zemulated_only"), Spec("kernel", "_Zemulated_only"), *common]
    recorded = [*common, *common, Spec("memset", size=64, times=[(9000, 9100, "memset")])]
    return build(tmp_path / "emu.mayatrace", emulated, recorded=False), build(
        tmp_path / "rec.mayatrace", recorded, recorded=True)


def test_text_report(tmp_path: Path) -> None:
    a, b = _pair(tmp_path)
    r = maya("trace", "diff", a, b)
    assert r.returncode == 0, r.stderr
    out = r.stdout
    assert f"A  {a}  (H100-SXM-80GB, rank 0): 8 device operations\n" in out
    assert f"B  {b}  (H100-SXM-80GB, rank 0): 7 device operations, measured\n" in out
    assert "matched   6  (identical 4, differing fields 2)" in out
    assert "A only    2  in 1 runs" in out and "B only    1  in 1 runs" in out
    # 100 + 450 + 400 per block, twice, of 1900 + 100 (the B-only memset)
    assert "matched operations cover 95.0% (6 operations)" in out
    assert "name a0 a1 a2 a3 a4 params kernels" in out  # DNN: record mode keeps the API name only
    assert "DNN sdpa_fprop: name sdpa_fprop | cudnnBackendExecute" in out
    assert "KERNEL _Zemulated_only, KERNEL _Zemulated_only" in out
    assert "MEMSET" in out


def test_json_report_and_limit(tmp_path: Path) -> None:
    a, b = _pair(tmp_path)
    r = maya("trace", "diff", b, a, "--json", "--limit", "1")
    assert r.returncode == 0, r.stderr
    report = json.loads(r.stdout)
    assert (report["a"]["ops"], report["b"]["ops"], report["matched"], report["identical"]) == (7, 8, 6, 4)
    assert (report["a_only"], report["b_only"], report["a_only_runs"], report["b_only_runs"]) == (1, 2, 1, 1)
    assert report["differing_fields"] == {"name a0 a1 a2 a3 a4 params kernels": 2}
    assert len(report["first_differing"]) == 1
    d = report["first_differing"][0]
    assert d["op"] == "DNN cudnnBackendExecute" and d["fields"]["params"][1][3] == 256
    assert report["first_b_only_runs"][0]["n"] == 2
    m = report["measured"]["a"]
    assert (m["busy_ns"], m["matched_busy_ns"], m["ops"], m["matched_ops"]) == (2000, 1900, 7, 6)
    assert "b" not in report["measured"]
    assert report["threads"] == {"python": {"a": 7, "b": 8, "matched": 6}}


def test_bad_files_give_a_one_line_error(tmp_path: Path) -> None:
    a, _ = _pair(tmp_path)
    r = maya("trace", "diff", a, tmp_path / "missing.mayatrace")
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert "missing.mayatrace" in r.stderr and len(r.stderr.strip().splitlines()) == 1
    not_a_trace = tmp_path / "notes.txt"
    not_a_trace.write_text("hello")
    r = maya("trace", "diff", not_a_trace, a)
    assert r.returncode == 2 and r.stderr.strip() == f"maya trace: {not_a_trace}: not a Maya trace (bad magic)"
    r = maya("trace", "diff", a)
    assert r.returncode == 2 and "usage: maya trace FILE | maya trace diff A B" in r.stderr


def test_trace_file_still_prints_counts(tmp_path: Path) -> None:
    _, b = _pair(tmp_path)
    r = maya("trace", b)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout.splitlines()[0])["gpu_name"] == "H100-SXM-80GB"
    assert "DEVICE_TIME" in r.stdout


@pytest.mark.emulation
@requires_library
def test_a_script_emulated_twice_matches_itself(tmp_path: Path) -> None:
    script = """
        import torch
        x = torch.randn(64, 128, device="cuda")
        lin = torch.nn.Linear(128, 256).cuda()
        for _ in range(3):
            y = torch.nn.functional.gelu(lin(x)).sum()
            y.backward()
        print(y.item())
        """
    (tmp_path / "one").mkdir()
    (tmp_path / "two").mkdir()
    first = run_emulated(script, tmp_path / "one")
    second = run_emulated(script, tmp_path / "two")
    assert first.returncode == 0 and second.returncode == 0, first.output + second.output
    r = maya("trace", "diff", first.trace_path(), second.trace_path(), "--json")
    assert r.returncode == 0, r.stderr
    report = json.loads(r.stdout)
    assert report["a"]["ops"] == report["b"]["ops"] == report["matched"] == report["identical"] > 10
    assert report["a_only"] == report["b_only"] == 0
