"""How fast this CPU runs Python while the job runs: the emulating CPU's pace, sampled.

The emulating machines' virtual CPUs run the interpreter up to twice as
slow in phases from tens of milliseconds to many seconds long, with no steal
time and no other process of theirs running; C code that streams through the
L2 cache slows as much, C code that stays in the L1 cache or the arithmetic
units a few percent (``benchmarks/python_phases.py``).  A job's host delays
are the interpreter's and torch's dispatcher's, so the steps that fall in
such a phase are slow, and an emulation whose steady steps all do predicts a
host-bound step 20-50% long while the probe, timed in another process before
it, reads as usual.  Under the emulating interposer the start-up hook
samples a yardstick of plain Python from a thread of the job's process,
every ``INTERVAL_S`` once the program has started CUDA (:class:`Sampler`),
each sample stamped with the trace clock and left out of it, as the hook's
other work is.  The prediction takes the median of the samples that fell in
each rank's steady steps, or nearest them where those are too short
(:func:`maya.predict.steady_pace`).  A sample is
taken just after the thread wakes, among the job's own work: a reading taken
otherwise (in a loop of its own, as a process starts) reads 15-25% quicker
and is no reference for them.

The yardstick is a dict's stores and lookups and integer arithmetic (the
interpreter's own work), timed by the thread's CPU time as the trace clock
is; a chunk takes about 0.25 ms, about 0.6% of the CPU at ``INTERVAL_S``.

Each sample also reads the main thread's scheduler counters (its time on a
CPU and its time runnable but waiting for one, ``/proc/<pid>/schedstat``):
a CPU shared with more ranks than there are CPUs, or with another process,
runs the job's host work slower while it runs (a fifth at two ranks a CPU),
which neither the trace clock (it leaves out only the waiting itself) nor
this yardstick (it fits in the L1 cache) sees (``maya.cpu_sharing``).
"""

import ctypes
import os
import threading
import time

ITERATIONS = 1500
INTERVAL_S = 0.04
MOST_SAMPLES = 200_000  # about two hours at INTERVAL_S
_TABLE: dict = {}


def _chunk() -> int:
    s = 0
    table = _TABLE
    for i in range(ITERATIONS):
        table[i % 5000] = s
        s += table.get((i * 7) % 5000, 1) % 13
    return s


def _schedstat() -> int | None:
    """The main thread's ``/proc/<pid>/schedstat`` (None: not readable here)."""
    try:
        return os.open(f"/proc/{os.getpid()}/task/{os.getpid()}/schedstat", os.O_RDONLY)
    except OSError:
        return None


def _on_cpu_and_waiting(fd: int | None) -> list:
    """[ns on a CPU, ns runnable and waiting for one] of the main thread so far ([] where not read)."""
    if fd is None:
        return []
    try:
        run, wait = os.pread(fd, 64, 0).split()[:2]
        return [int(run), int(wait)]
    except (OSError, ValueError):
        return []


def _timed() -> int:
    t = time.thread_time_ns()
    _chunk()
    return time.thread_time_ns() - t


class Sampler:
    """A daemon thread that times one chunk every ``INTERVAL_S`` once ``ready()`` (the program has started
    CUDA): ``samples`` holds [trace clock ns, chunk ns, the main thread's ns on a CPU, its ns waiting for
    one] (the last two missing where ``/proc`` does not say).  ``pause`` and ``now`` are the interposer's
    ``maya_hook_pause`` and ``maya_trace_now_ns``."""

    def __init__(self, pause, now, ready) -> None:  # type: ignore[no-untyped-def]
        pause.argtypes, pause.restype = [ctypes.c_int], None
        now.argtypes, now.restype = [], ctypes.c_uint64
        self._pause, self._now, self._ready = pause, now, ready
        self.samples: list = []
        self._schedstat = _schedstat()
        threading.Thread(target=self._run, name="maya_pace", daemon=True).start()

    def _run(self) -> None:
        while len(self.samples) < MOST_SAMPLES:
            time.sleep(INTERVAL_S)
            if not self._ready():
                continue
            self._pause(1)
            try:
                self.samples.append([int(self._now()), _timed(), *_on_cpu_and_waiting(self._schedstat)])
            finally:
                self._pause(0)
