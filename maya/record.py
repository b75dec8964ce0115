"""``maya record``: run an unmodified command on a real GPU and trace it.

The second mode of the interposer (``libmaya_record.so``, built from
``emulation-image/src/record``) forwards every call to the real CUDA
libraries and writes the same trace as emulation, each device operation
followed by the measured device time of the kernels, copies and memsets it
caused (``DEVICE_TIME`` records).  The output folder also gets
``record.json``: the GPU, its driver and the library versions the times were
measured with, which every profile built from the traces carries.

Standard library only, so it runs from a checkout on a GPU machine
(``python3 -m maya record ...`` at the repository root) without installing.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from maya import catalog

PACKAGE_DIR = Path(__file__).resolve().parent
DEFAULT_LIBRARY = PACKAGE_DIR.parent / "emulation-image" / "build" / "libmaya_record.so"
_STALE = ("rank*.mayatrace", "record.json")

# Versions of the libraries torch loads, read in the command's own Python.
_VERSIONS_PY = r"""
import json, importlib.metadata as md, torch
def dist(*names):
    for n in names:
        try:
            return md.version(n)
        except md.PackageNotFoundError:
            pass
    return None
nccl = torch.cuda.nccl.version() if torch.cuda.is_available() else None
print(json.dumps({
    "torch": torch.__version__, "cuda": torch.version.cuda,
    "cudnn": torch.backends.cudnn.version(),
    "nccl": ".".join(map(str, nccl)) if isinstance(nccl, tuple) else nccl,
    "cublas": dist("nvidia-cublas", "nvidia-cublas-cu13", "nvidia-cublas-cu12"),
    "cupti": dist("nvidia-cuda-cupti", "nvidia-cuda-cupti-cu13", "nvidia-cuda-cupti-cu12"),
}))
"""


class RecordError(Exception):
    """A problem with the request or the machine (not with the command)."""


@dataclass(frozen=True)
class RecordOptions:
    out: Path
    command: Sequence[str]


def find_library() -> Path:
    env = os.environ.get("MAYA_RECORD_LIBRARY")
    lib = Path(env) if env else DEFAULT_LIBRARY
    if not lib.is_file():
        raise RecordError(
            f"the record-mode library {lib} is not built; run 'make -C emulation-image' on this machine "
            "(it needs the CUDA headers and CUPTI of the installed torch) or set MAYA_RECORD_LIBRARY"
        )
    return lib.resolve()


def detect_gpu() -> tuple[str, str]:
    """(catalog name, driver version) of GPU 0, from nvidia-smi."""
    smi = shutil.which("nvidia-smi")
    if not smi:
        raise RecordError(
            "record mode needs an NVIDIA GPU and its driver (nvidia-smi was not found); "
            "on a machine without one, use 'maya emulate'"
        )
    try:
        out = subprocess.run(
            [smi, "--query-gpu=name,driver_version", "--format=csv,noheader"],
            capture_output=True, text=True, check=True, timeout=60,
        ).stdout
    except (subprocess.SubprocessError, OSError) as e:
        raise RecordError(f"nvidia-smi failed ({e}); is the NVIDIA driver working?") from e
    first = out.strip().splitlines()[0] if out.strip() else ""
    if "," not in first:
        raise RecordError(f"nvidia-smi reported no GPU: {out.strip()!r}")
    name, driver = (s.strip() for s in first.split(",", 1))
    return catalog_name(name), driver


def catalog_name(marketing: str) -> str:
    """The catalog name of a device name as the driver reports it, or that name."""
    for g in catalog.all_gpus():
        if g.marketing.lower() == marketing.lower():
            return g.name
    return marketing


def library_versions(python: str) -> dict[str, object]:
    try:
        out = subprocess.run([python, "-c", _VERSIONS_PY], capture_output=True, text=True, timeout=300)
        return json.loads(out.stdout.strip().splitlines()[-1]) if out.returncode == 0 else {"error": out.stderr[-500:]}
    except (subprocess.SubprocessError, OSError, ValueError, IndexError) as e:
        return {"error": str(e)}


def record(opts: RecordOptions) -> int:
    """Run the command with measuring on; returns its exit code."""
    if not opts.command:
        raise RecordError("no command given (usage: maya record --out DIR -- COMMAND...)")
    library = find_library()
    gpu, driver = detect_gpu()
    opts.out.mkdir(parents=True, exist_ok=True)
    for pattern in _STALE:
        for stale in opts.out.glob(pattern):
            stale.unlink()
    env = dict(os.environ)
    env["LD_PRELOAD"] = str(library) + (os.pathsep + env["LD_PRELOAD"] if env.get("LD_PRELOAD") else "")
    env["CUDA_INJECTION64_PATH"] = str(library)
    env["MAYA_TRACE_DIR"] = str(opts.out.resolve())
    env["MAYA_GPU_NAME"] = gpu
    try:
        proc = subprocess.run(list(opts.command), env=env)
        code = proc.returncode
    except FileNotFoundError:
        print(f"maya: command not found: {opts.command[0]}", file=sys.stderr)
        code = 127
    python = opts.command[0] if Path(opts.command[0]).name.startswith("python") else sys.executable
    info = {
        "gpu": gpu,
        "driver": driver,
        **library_versions(python),
        "command": list(opts.command),
        "exit_code": code,
        "traces": sorted(p.name for p in opts.out.glob("rank*.mayatrace")),
    }
    (opts.out / "record.json").write_text(json.dumps(info, indent=1) + "\n")
    print(f"maya: recorded on {gpu} (driver {driver}); traces and record.json in {opts.out}", file=sys.stderr)
    return code
