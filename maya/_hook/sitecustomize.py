"""Maya's start-up hook, put on PYTHONPATH by ``maya emulate``.

Python imports ``sitecustomize`` at start-up.  This one first runs any other
``sitecustomize`` further along sys.path (so an environment's own hook still
works), then watches the process: at exit, if it initialised CUDA, it writes
``$MAYA_TRACE_DIR/rank<RANK>.torch.json`` with what only PyTorch knows (the
caching allocator's peaks per device, whether a ``torch.OutOfMemoryError``
escaped, the exit status as far as it can tell).  It never imports torch
itself and never raises.

With ``MAYA_PIN_CPU=1`` (``maya emulate`` sets it) it also pins the process
to one CPU, the local rank's of ``$MAYA_CPUS`` (the CPUs in the order
``maya emulate`` gives them: those other work keeps busy last), before torch
starts its threads: the host
delays measured under emulation then vary far less between runs (threads
that migrate between CPUs, and wake each other across them, made the same
step's host time differ by up to 50% from one emulation to the next).
Processes the program forks (data loader workers) get every CPU back.

Python's garbage collections are left out of the trace clock: a gc callback
tells the interposer when each starts and stops (``maya_gc_pause``; the
reasons are in emulation-image/src/trace.c).

Under the emulating interposer, once the program imports torch, its
data-dependent operations are wrapped (``_maya_device_values``; not with
``MAYA_DEVICE_VALUES=0``): the ones with a natural expected result get it,
the other reads of device values are counted by program line, and the counts
go into the torch report.  Once Inductor's launcher is imported, each Triton
kernel tells the interposer, before its first launch, the sizes and bytes its
source says it moves (``_maya_triton``), which its launches record.
"""

import atexit
import importlib.abc
import importlib.machinery
import importlib.util
import json
import os
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))


def _chain() -> None:
    """Run the next sitecustomize on sys.path, under another module name."""
    path = [p for p in sys.path if os.path.abspath(p or ".") != _HERE]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", path)
    if spec is None or spec.loader is None or not spec.origin:
        return
    if os.path.dirname(os.path.abspath(spec.origin)) == _HERE:
        return
    module = importlib.util.module_from_spec(spec)
    sys.modules["_maya_chained_sitecustomize"] = module
    try:
        spec.loader.exec_module(module)
    except Exception as e:  # the chained hook's failure must not stop the program
        print(f"maya: the chained sitecustomize {spec.origin} failed: {e!r}", file=sys.stderr)


_state: dict = {"exit_status": None, "oom": False, "oom_message": None, "exception": None}


def _excepthook(kind, value, tb):  # type: ignore[no-untyped-def]
    _state["exit_status"] = 1
    _state["exception"] = getattr(kind, "__name__", str(kind))
    torch = sys.modules.get("torch")
    oom_type = getattr(torch, "OutOfMemoryError", None) if torch else None
    if oom_type is not None and isinstance(value, oom_type):
        _state["oom"] = True
        _state["oom_message"] = str(value)[:2000]
    _previous_excepthook(kind, value, tb)


_previous_exit = sys.exit


def _exit(status=None):  # type: ignore[no-untyped-def]
    if status is None:
        _state["exit_status"] = 0
    elif isinstance(status, int):
        _state["exit_status"] = status
    else:
        _state["exit_status"] = 1
    _previous_exit(status)


def _write() -> None:
    out_dir = os.environ.get("MAYA_TRACE_DIR")
    torch = sys.modules.get("torch")
    if not out_dir or torch is None:
        return
    try:
        if not torch.cuda.is_initialized():
            return
        devices = []
        for d in range(torch.cuda.device_count()):
            devices.append(
                {
                    "device": d,
                    "max_memory_allocated": int(torch.cuda.max_memory_allocated(d)),
                    "max_memory_reserved": int(torch.cuda.max_memory_reserved(d)),
                    "memory_allocated": int(torch.cuda.memory_allocated(d)),
                    "memory_reserved": int(torch.cuda.memory_reserved(d)),
                }
            )
        status = _state["exit_status"]
        rank = os.environ.get("RANK", "0")
        values = sys.modules.get("_maya_device_values")
        report = {
            "rank": int(rank) if rank.lstrip("-").isdigit() else rank,
            "pid": os.getpid(),
            "exit_status": 0 if status is None else status,
            "out_of_memory": _state["oom"],
            "oom_message": _state["oom_message"],
            "exception": _state["exception"],
            "devices": devices,
            "device_values": values.report() if values is not None else None,
            "cpu_pace": _pace_report(),
        }
        os.makedirs(out_dir, exist_ok=True)
        path = os.path.join(out_dir, f"rank{rank}.torch.json")
        if os.path.exists(path):  # a second CUDA process of the same rank
            path = os.path.join(out_dir, f"rank{rank}.pid{os.getpid()}.torch.json")
        tmp = path + ".tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(report, f, indent=1)
        os.replace(tmp, path)
    except Exception as e:  # never turn a finished program into a failing one
        print(f"maya: could not write the torch report: {e!r}", file=sys.stderr)


def _pace() -> None:
    """Under the emulating interposer, the Python yardstick of ``_maya_pace`` sampled while the program runs."""
    pause, now = _emulating_export("maya_hook_pause"), _emulating_export("maya_trace_now_ns")
    if pause is None or now is None or not os.environ.get("MAYA_TRACE_DIR"):
        return
    try:
        import _maya_pace

        _state["pace"] = _maya_pace.Sampler(pause, now, _cuda_started)
    except Exception as e:  # the program runs on unsampled
        print(f"maya: could not sample the CPU's pace: {e!r}", file=sys.stderr)


def _cuda_started() -> bool:
    """Whether the program has started CUDA: only such a process's pace is read (not torchrun's agent's)."""
    torch = sys.modules.get("torch")
    cuda = getattr(torch, "cuda", None)
    return bool(cuda is not None and cuda.is_initialized())


def _pace_report():  # type: ignore[no-untyped-def]
    """The yardstick's samples ([trace clock ns, chunk ns, main thread on a CPU ns, waiting ns]); None: not sampled."""
    sampler = _state.get("pace")
    if sampler is None:
        return None
    return {"samples": list(sampler.samples)}


def _pin() -> None:
    if os.environ.get("MAYA_PIN_CPU") != "1" or not hasattr(os, "sched_setaffinity"):
        return
    try:
        # The CPUs the job was given: a process started by a pinned one (torchrun's agent starts
        # the ranks) inherits its single CPU, so the first records them for the others.
        given = os.environ.get("MAYA_CPUS") or ",".join(str(c) for c in sorted(os.sched_getaffinity(0)))
        os.environ["MAYA_CPUS"] = given
        cpus = [int(c) for c in given.split(",")]
        local = os.environ.get("LOCAL_RANK", "0")
        cpu = cpus[(int(local) if local.isdigit() else 0) % len(cpus)]
        os.sched_setaffinity(0, {cpu})
        os.register_at_fork(after_in_child=lambda: os.sched_setaffinity(0, cpus))
    except (OSError, ValueError):  # a container that forbids it: run unpinned
        pass


def _emulating_export(name: str):  # type: ignore[no-untyped-def]
    """The emulating interposer's export ``name``; None when not under it (or in record mode)."""
    try:
        import ctypes

        return getattr(ctypes.PyDLL(None), name)  # PyDLL keeps the GIL: the exports only take a lock
    except (ImportError, OSError, AttributeError):
        return None


def _bracket_collections() -> None:
    """Tell the interposer when each garbage collection starts and stops (a no-op with the wall clock)."""
    import ctypes
    import gc

    pause = _emulating_export("maya_gc_pause")
    if pause is None:
        return
    pause.argtypes = [ctypes.c_int]
    pause.restype = None

    def on_collection(phase, info, _pause=pause):  # type: ignore[no-untyped-def]
        _pause(1 if phase == "start" else 0)

    gc.callbacks.append(on_collection)


class _AfterImport(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds module ``fullname`` as usual, and once it has run, calls ``then`` with it."""

    def __init__(self, fullname, then, what):  # type: ignore[no-untyped-def]
        self._fullname, self._then, self._what = fullname, then, what

    def find_spec(self, fullname, path, target=None):  # type: ignore[no-untyped-def]
        if fullname != self._fullname:
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(fullname)
        if spec is not None and spec.loader is not None:
            self._loader = spec.loader
            spec.loader = self
        return spec

    def create_module(self, spec):  # type: ignore[no-untyped-def]
        return self._loader.create_module(spec)

    def exec_module(self, module):  # type: ignore[no-untyped-def]
        self._loader.exec_module(module)
        try:
            self._then(module)
        except Exception as e:  # the program runs on without the wrappers
            print(f"maya: could not {self._what}: {e!r}", file=sys.stderr)


def _wrap_device_values(torch):  # type: ignore[no-untyped-def]
    import _maya_device_values

    _maya_device_values.install(torch)


def _watch_device_values() -> None:
    """``MAYA_DEVICE_VALUES=0``: leave torch alone (device values then read as zeros everywhere)."""
    if os.environ.get("MAYA_DEVICE_VALUES", "1") == "0":
        return
    if _emulating_export("maya_gc_pause") is not None and "torch" not in sys.modules:
        sys.meta_path.insert(0, _AfterImport("torch", _wrap_device_values, "wrap torch's data-dependent operations"))


_HEURISTICS = "torch._inductor.runtime.triton_heuristics"


def _wrap_triton_launches(heuristics):  # type: ignore[no-untyped-def]
    import _maya_triton

    _maya_triton.install(heuristics)


def _watch_triton_kernels() -> None:
    """Once Inductor's launcher is imported, its Triton kernels tell the interposer their sizes."""
    if _emulating_export("maya_kernel_facts") is not None and _HEURISTICS not in sys.modules:
        sys.meta_path.insert(0, _AfterImport(_HEURISTICS, _wrap_triton_launches, "read Triton kernels' sizes"))


_chain()
_pin()
_pace()
_bracket_collections()
_watch_device_values()
_watch_triton_kernels()
_previous_excepthook = sys.excepthook
sys.excepthook = _excepthook
sys.exit = _exit
atexit.register(_write)
