"""``maya emulate``: run an unmodified command on emulated GPUs.

The command (a ``python`` or ``torchrun`` command line) runs untouched, with
the interposer preloaded and configured through the environment; its own
output passes through.  When it ends, the run's shared-memory objects are
removed, ``DIR/summary.json`` is written and a short summary is printed on
stderr.  The exit code is the command's.

Before the command, :mod:`maya.cpu_probe` times the emulating CPU (a few
seconds).  ``MAYA_HOST_PROBE_NS`` gives that reading instead: one probe for
many emulations on one machine, or the calibrating CPU's
(:func:`maya.cpu_probe.reference_ns`) for replays that do not depend on the
machine's load, as the tests do.
"""

from __future__ import annotations

import contextlib
import glob
import json
import math
import os
import secrets
import signal
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType

from maya import catalog, cpu_probe, other_work
from maya.summary import render, summarize

PACKAGE_DIR = Path(__file__).resolve().parent
HOOK_DIR = PACKAGE_DIR / "_hook"
# In a checkout (editable install) the interposer is built next to the package.
DEFAULT_LIBRARY = PACKAGE_DIR.parent / "emulation-image" / "build" / "libmaya.so"

# Files a previous run may have left in the output folder.
_STALE = ("rank*.mayatrace", "rank*.torch.json", "rank*.torch.json.tmp", "summary.json")


class EmulateError(Exception):
    """A problem with the request itself (not with the command it runs)."""


@dataclass(frozen=True)
class EmulateOptions:
    """What ``maya emulate`` was asked to do.

    gpu: catalog name (case-insensitive).
    out: output folder for traces, hook reports and summary.json.
    command: the command line to run, unchanged.
    gpus: GPUs visible to each process (MAYA_NUM_GPUS); default gpus_per_node.
    gpus_per_node: virtual node size (MAYA_GPUS_PER_NODE); default 8.
    env: extra environment variables for the command.
    """

    gpu: str
    out: Path
    command: Sequence[str]
    gpus: int | None = None
    gpus_per_node: int | None = None
    env: Mapping[str, str] = field(default_factory=dict)


def find_library() -> Path:
    """The interposer: ``$MAYA_LIBRARY`` or the checkout's build folder."""
    env = os.environ.get("MAYA_LIBRARY")
    lib = Path(env) if env else DEFAULT_LIBRARY
    if not lib.is_file():
        raise EmulateError(
            f"the interposer {lib} is not built; run 'make' in the repository "
            "(or 'make -C emulation-image') or set MAYA_LIBRARY"
        )
    return lib.resolve()


def _prepend(value: str, existing: str | None) -> str:
    return value + (os.pathsep + existing if existing else "")


def build_env(opts: EmulateOptions, gpu: catalog.GPU, library: Path, run_id: str) -> dict[str, str]:
    """The command's environment: ours on top of the caller's."""
    env = dict(os.environ)
    env.update(opts.env)
    per_node = opts.gpus_per_node or 8
    env["LD_PRELOAD"] = _prepend(str(library), env.get("LD_PRELOAD"))
    env["LD_LIBRARY_PATH"] = _prepend(str(library.parent), env.get("LD_LIBRARY_PATH"))
    env["MAYA_GPU_SPEC"] = gpu.spec_string()
    env["MAYA_GPUS_PER_NODE"] = str(per_node)
    env["MAYA_NUM_GPUS"] = str(opts.gpus or per_node)
    env["MAYA_TRACE_DIR"] = str(opts.out.resolve())
    env["MAYA_RUN_ID"] = run_id
    env["PYTHONPATH"] = _prepend(str(HOOK_DIR), env.get("PYTHONPATH"))
    env.setdefault("MAYA_PIN_CPU", "1")  # one CPU per rank: steadier host delays (the hook)
    return env


def cleanup_shm(run_id: str) -> None:
    for path in glob.glob(f"/dev/shm/maya-{run_id}-*"):
        with contextlib.suppress(OSError):
            os.unlink(path)


def _run(command: Sequence[str], env: dict[str, str]) -> int:
    """Run the command with our stdio, forwarding SIGINT/SIGTERM; shell-style code."""
    try:
        proc = subprocess.Popen(list(command), env=env)
    except FileNotFoundError:
        print(f"maya: command not found: {command[0]}", file=sys.stderr)
        return 127
    except PermissionError:
        print(f"maya: cannot execute: {command[0]}", file=sys.stderr)
        return 126

    def forward(sig: int, _frame: FrameType | None) -> None:
        proc.send_signal(sig)

    # Ctrl-C reaches the whole foreground process group, the command included:
    # wait for it to finish its own handling.  SIGTERM is sent to us alone.
    old = {signal.SIGINT: signal.signal(signal.SIGINT, signal.SIG_IGN),
           signal.SIGTERM: signal.signal(signal.SIGTERM, forward)}
    try:
        code = proc.wait()
    finally:
        for s, h in old.items():
            signal.signal(s, h)
    return 128 - code if code < 0 else code


def given_probe_ns() -> float | None:
    """``$MAYA_HOST_PROBE_NS``, the emulating CPU's probe reading given instead of measured; None: unset."""
    text = os.environ.get("MAYA_HOST_PROBE_NS", "").strip()
    if not text:
        return None
    try:
        ns = float(text)
    except ValueError:
        ns = math.nan
    if not (math.isfinite(ns) and ns > 0):
        raise EmulateError(f"MAYA_HOST_PROBE_NS={text!r} is not a positive number of ns per probe step; "
                           "unset it to time the probe")
    return ns


def emulate(opts: EmulateOptions) -> int:
    """Run the command under emulation and summarise it; returns its exit code."""
    if not opts.command:
        raise EmulateError("no command given (usage: maya emulate --gpu NAME --out DIR -- COMMAND...)")
    gpu = catalog.lookup(opts.gpu)
    for name, value in (("--gpus", opts.gpus), ("--gpus-per-node", opts.gpus_per_node)):
        if value is not None and not 1 <= value <= 16:
            raise EmulateError(f"{name} must be between 1 and 16")
    given = given_probe_ns()
    library = find_library()
    opts.out.mkdir(parents=True, exist_ok=True)
    for pattern in _STALE:
        for stale in opts.out.glob(pattern):
            stale.unlink()
    run_id = secrets.token_hex(6)
    env = build_env(opts, gpu, library, run_id)
    # Before the job, not beside it: the probe would slow the job's own host delays.  It runs under
    # the interposer as the job does, with run ids of its own ("<run_id>-probe": cleaned up with the job's).
    cpu = None
    if env["MAYA_PIN_CPU"] == "1":  # the ranks take the CPUs in this order (the hook), the probe rank 0's
        cpus = other_work.quietest_cpus()
        env["MAYA_CPUS"] = ",".join(map(str, cpus))
        cpu = cpus[0]
    probe_env = {**env, "MAYA_RUN_ID": f"{run_id}-probe"}
    try:
        probe_ns = given if given is not None else cpu_probe.measure(probe_env, cpu=cpu)
        before = other_work.sample()
        code = _run(opts.command, env)
        taken = other_work.share(before, other_work.sample())
        if given is None:  # a disturbed reading: once more
            probe_ns = cpu_probe.steadier(probe_ns, lambda: cpu_probe.measure(probe_env, cpu=cpu))
    finally:
        cleanup_shm(run_id)
    summary = summarize(
        opts.out,
        gpu={
            "name": gpu.name,
            "marketing": gpu.marketing,
            "memory_bytes": gpu.memory_bytes,
            "usable_bytes": gpu.memory_bytes - gpu.reserved_bytes,
            "gpus_per_process": int(env["MAYA_NUM_GPUS"]),
            "gpus_per_node": int(env["MAYA_GPUS_PER_NODE"]),
        },
        exit_code=code,
        command=list(opts.command),
    )
    summary["run_id"] = run_id
    summary["host_probe_ns"] = probe_ns  # maya.cpu_probe: the emulating CPU's speed
    summary["emulating_cpus"] = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    summary["other_work_cpu_share"] = taken  # maya.other_work: the emulating CPUs' time others took
    (opts.out / "summary.json").write_text(json.dumps(summary, indent=1) + "\n")
    for line in render(summary):
        print(line, file=sys.stderr)
    if busy := other_work.warning(taken):
        print(busy, file=sys.stderr)
    print(f"maya: traces and summary.json in {opts.out}", file=sys.stderr)
    return code
