"""Helper for tests that run Python code under ``maya emulate``.

    from emulated import run_emulated, requires_library

    @requires_library
    def test_x(tmp_path):
        r = run_emulated("import torch; torch.zeros(1, device='cuda')", tmp_path)
        assert r.returncode == 0, r.output
        assert r.summary["ranks"][0]["kernel_launches"] >= 1

The script runs through the venv's ``maya`` (``python -m maya.cli``) exactly
as a user would run it; tests are skipped when the interposer is not built.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parent.parent
LIBRARY = Path(os.environ.get("MAYA_LIBRARY") or REPO / "emulation-image" / "build" / "libmaya.so")

requires_library = pytest.mark.skipif(
    not LIBRARY.is_file(), reason=f"interposer not built ({LIBRARY}); run 'make'"
)


def host_steps(steps: int, host_s: float) -> str:
    """A training loop's script: per step ``host_s`` of the thread's CPU time on the host, one kernel and a
    device synchronisation."""
    return f"""
import time, torch
x = torch.ones(4, device="cuda")
for _ in range({steps}):
    t = time.thread_time()
    while time.thread_time() - t < {host_s}:  # the step's host work
        pass
    x.add_(1)
    torch.cuda.synchronize()
"""


@dataclass
class EmulatedRun:
    """Outcome of one ``maya emulate`` run."""

    returncode: int
    stdout: str
    stderr: str
    out_dir: Path
    summary: dict[str, Any] = field(default_factory=dict)

    @property
    def output(self) -> str:
        """stdout and stderr together, for assertion messages."""
        return f"--- stdout\n{self.stdout}\n--- stderr\n{self.stderr}"

    @property
    def rank0(self) -> dict[str, Any]:
        return self.summary["ranks"][0]

    def trace_path(self, rank: int = 0) -> Path:
        return self.out_dir / f"rank{rank}.mayatrace"


def run_emulated(
    script_text: str,
    tmp_path: Path,
    *,
    gpu: str = "H100-SXM-80GB",
    torchrun_nproc: int | None = None,
    gpus: int | None = None,
    gpus_per_node: int | None = None,
    env: dict[str, str] | None = None,
    args: list[str] | None = None,
    timeout: float = 600,
) -> EmulatedRun:
    """Write ``script_text`` to ``tmp_path/script.py`` and run it under ``maya emulate``.

    With ``torchrun_nproc`` the script is started by torchrun (standalone
    rendezvous) with that many processes on one virtual node.  ``env`` adds
    variables to the command's environment.  ``timeout`` only catches a hang:
    a busy machine runs an emulation many times slower than an idle one.
    Skips the test when the interposer is not built.
    """
    if not LIBRARY.is_file():
        pytest.skip(f"interposer not built ({LIBRARY}); run 'make'")
    script = tmp_path / "script.py"
    script.write_text(textwrap.dedent(script_text))
    out = tmp_path / "out"
    if torchrun_nproc:
        command = [
            sys.executable, "-m", "torch.distributed.run", "--standalone",
            f"--nproc-per-node={torchrun_nproc}", str(script),
        ]
    else:
        command = [sys.executable, str(script)]
    command += args or []
    cli = [sys.executable, "-m", "maya.cli", "emulate", "--gpu", gpu, "--out", str(out)]
    if gpus is not None:
        cli += ["--gpus", str(gpus)]
    if gpus_per_node is not None:
        cli += ["--gpus-per-node", str(gpus_per_node)]
    full_env = dict(os.environ)
    full_env.setdefault("PYTHONUNBUFFERED", "1")
    full_env.update(env or {})
    proc = subprocess.run(
        [*cli, "--", *command],
        cwd=tmp_path,
        env=full_env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    summary_path = out / "summary.json"
    summary = json.loads(summary_path.read_text()) if summary_path.is_file() else {}
    return EmulatedRun(proc.returncode, proc.stdout, proc.stderr, out, summary)
