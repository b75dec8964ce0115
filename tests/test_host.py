"""The host model (maya.predictor.replay.host): replayed host time per step, the fitted slowdown, the
calibrated model that ``maya predict`` applies, and its rescaling to the emulating CPU's speed
(maya.cpu_probe)."""

from __future__ import annotations

import json
import os
import re
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pytest
from loops import loop_trace, moe_like_trace

from maya import catalog, cpu_probe
from maya.emulate import EmulateOptions, build_env, find_library
from maya.predict import Job
from maya.predictor.replay.host import (
    CALIBRATION,
    CALL_SCALES,
    NODE_SLOWDOWNS,
    SLOWDOWNS,
    HostModel,
    expected_max_normal,
    first_gemm_shapes,
    fit_host,
    fit_node_slowdown,
    host_model,
    quiet_gap_scales,
    rank_wait,
    server_call_ns,
    steady_step_delays,
    step_host_times_ns,
)
from maya.predictor.replay.simulator import CALL_NS, simulate
from maya.predictor.trace import Flag, Kind, Trace, TraceWriter, read_trace

if TYPE_CHECKING:
    from emulated import EmulatedRun

ROOT = Path(__file__).resolve().parents[1]


def test_replayed_host_time_per_step(tmp_path: Path) -> None:
    trace = read_trace(loop_trace(tmp_path / "r.mayatrace", slower_ns=1000))
    kernels = trace.of_kind(Kind.KERNEL).tolist()
    (fast,) = simulate([trace], [{}], lambda *_: 0.0, host_slowdown=2.0, call_ns={}, default_call_ns=0.0)
    # Host gaps only (calls cost nothing here), doubled: 2 x (60 + 3 s + 5) us for step s.
    assert step_host_times_ns(trace, fast, 3) == pytest.approx([142_000.0, 148_000.0, 154_000.0])
    # The last kernel of each step runs 1 ms: the host waits for it after reaching the step's end.
    (late,) = simulate([trace], [{k: 1e6 for k in kernels[2::3]}], lambda *_: 0.0, call_ns={}, default_call_ns=0.0)
    assert step_host_times_ns(trace, late, 5) == pytest.approx([65_000.0 + 3000 * s for s in range(5)])
    with pytest.raises(ValueError, match="6 device synchronisations, 7 needed for 6 steps"):
        step_host_times_ns(trace, late, 6)
    # The first kernel runs 1 ms and the host synchronises on it inside the step: that wait counts.
    trace = read_trace(loop_trace(tmp_path / "m.mayatrace", slower_ns=1000, mid_sync=True))
    kernels = trace.of_kind(Kind.KERNEL).tolist()
    (held,) = simulate([trace], [{k: 1e6 for k in kernels[0::3]}], lambda *_: 0.0, call_ns={}, default_call_ns=0.0)
    assert step_host_times_ns(trace, held, 5) == pytest.approx([1_065_000.0 + 3000 * s for s in range(5)])


def test_each_steady_step_is_steadied_to_the_quickest(tmp_path: Path) -> None:
    trace = read_trace(loop_trace(tmp_path / "r.mayatrace", steps=6, slower_ns=1000))
    order, spans, totals = steady_step_delays(trace)
    # Step s's delays: 60 + 3 s us, and 5 us before its synchronisation; the last step has no end.
    assert totals == pytest.approx([65_000.0 + 3000 * s for s in range(5)])
    (scale,) = quiet_gap_scales([trace])
    inside = np.zeros(len(scale), bool)
    for (a, b), total in zip(spans, totals, strict=True):
        assert scale[order[a:b]] == pytest.approx(65_000.0 / total)
        inside[order[a:b]] = True
    assert (scale[~inside] == 1.0).all()


def test_steps_that_differ_in_their_operations_are_steadied_per_operation(tmp_path: Path) -> None:
    """A packed batch's step launches a copy per length, as many as it has: a step of more copies has as
    much more host work, and a host as steady as here (10 us before every call) is left as it is."""
    w = TraceWriter(rank=0, world_size=1)
    for k, name in enumerate(("embed", "copy", "lstm"), start=1):
        sid = w.string(name)
        w.record(Kind.FUNC, t_ns=0, a=[k, sid, sid])
    t = 0
    w.record(Kind.DEVICE_SYNC, t_ns=t)
    for copies in (5, 9, 6, 12, 7, 10):
        for k in (1, *[2] * copies, 3):
            t += 10_000
            w.record(Kind.KERNEL, t_ns=t, dur_ns=0, a=[k, 1, 1, 0, 0], flags=Flag.ASYNC)
            if k == 1:
                t += 10_000
                w.record(Kind.STREAM_SYNC, t_ns=t)
        t += 10_000
        w.record(Kind.DEVICE_SYNC, t_ns=t)
    w.write(tmp_path / "packed.mayatrace")
    trace = read_trace(tmp_path / "packed.mayatrace")
    _, spans, totals = steady_step_delays(trace)
    assert len(spans) >= 3 and len({b - a for a, b in spans}) > 1  # steps found, of different lengths
    (scale,) = quiet_gap_scales([trace])
    assert scale == pytest.approx(np.ones(len(scale)))


def test_ranks_doing_the_same_work_are_steadied_to_the_quickest_of_them(tmp_path: Path) -> None:
    """A rank whose process ran twice as slow in every step is priced at the other's pace; a rank
    whose steps do other work keeps its own."""
    fast, slow, other = (read_trace(loop_trace(tmp_path / f"{n}.mayatrace", steps=6, slower_ns=1000, pace=p,
                                               mid_sync=n == "other"))
                         for n, p in (("fast", 1.0), ("slow", 2.0), ("other", 2.0)))
    scales = quiet_gap_scales([fast, slow, other])
    for trace, scale, quickest in zip((fast, slow, other), scales, (65_000.0, 65_000.0, 130_000.0), strict=True):
        order, spans, totals = steady_step_delays(trace)
        for (a, b), total in zip(spans, totals, strict=True):
            assert scale[order[a:b]] == pytest.approx(quickest / total)


def test_fit_host_separates_delays_from_calls() -> None:
    s, m = SLOWDOWNS[:, None], CALL_SCALES[None, :]
    # Host time = slowdown x delays + call scale x call costs, in four proportions; the third
    # configuration waits for its device, the last is noise.
    host = np.stack([2.0 * s + 1.0 * m, 1.0 * s + 3.0 * m, 0.0 * s + 0.0 * m + 9.0, 1.0 * s + 1.0 * m])
    measured = [2.0 * 3.0 + 1.0 * 1.5, 1.0 * 3.0 + 3.0 * 1.5, 10.0, 20.0]
    assert fit_host(host, measured) == pytest.approx((3.0, 1.5))
    with pytest.raises(ValueError):
        fit_host(host, measured[:2])


def test_calibrated_and_nominal_host(tmp_path: Path) -> None:
    calib = json.loads(CALIBRATION.read_text())
    for gpu, m in calib["machines"].items():  # the committed calibration is what predict uses
        h = host_model(gpu)
        assert h.slowdown == m["slowdown"] > 1.0 and h.default_call_ns == 0.0
        assert m["call_ns"]["kernel"] > 1000.0 and m["call_scale"] > 0
        priced = h.priced_calls()
        assert priced is not None and priced[int(Kind.KERNEL)] == pytest.approx(m["call_ns"]["kernel"] * m["call_scale"])
    nominal = host_model("no-such-gpu")
    assert nominal == HostModel() and nominal.slowdown == 1.0 and nominal.call_ns == dict(CALL_NS)
    path = tmp_path / "c.json"
    path.write_text(json.dumps({"machines": {"X": {"slowdown": 2.5, "configs": 3}}}))
    assert host_model("X", path).slowdown == 2.5 and host_model("X", path).call_ns == {}
    # A job of several ranks runs on a machine of several GPUs: its calls as measured there, where they were.
    path.write_text(json.dumps({"machines": {"X": {"slowdown": 2.5, "call_scale": 1.5, "call_ns": {"kernel": 4000.0},
                                                   "node_call_ns": {"kernel": 3000.0}}}}))
    assert host_model("X", path, ranks=2).call_ns == {int(Kind.KERNEL): 3000.0}
    assert host_model("X", path).call_ns == {int(Kind.KERNEL): 4000.0}
    assert host_model("X", path, ranks=2).slowdown == 2.5 and host_model("X", path, ranks=2).call_scale == 1.5
    for gpu, m in calib["machines"].items():  # the committed costs of several GPUs are those measured there
        measured = json.loads((ROOT / "benchmarks" / "data" / "server_call_cost" / f"{gpu}-node.json").read_text())
        assert m["node_call_ns"] == measured["ns_per_call"]
        assert host_model(gpu, ranks=2).call_ns == server_call_ns(m["node_call_ns"]) != host_model(gpu).call_ns


def one_rank_job(trace: Trace, folder: Path) -> Job:
    """A one-rank job of ``trace``, its device operations untimed: to replay on various hosts."""
    return Job(catalog.lookup("H100-SXM-80GB"), folder, [trace], [{}], [[]], {}, [set()], 1,
               [np.ones(len(trace.records))], {}, {})


def loop_job(tmp_path: Path) -> tuple[Trace, Job]:
    """A one-rank job of the loop trace."""
    trace = read_trace(loop_trace(tmp_path / "r.mayatrace"))
    return trace, one_rank_job(trace, tmp_path)

def test_a_job_of_several_ranks_waits_for_the_slowest(tmp_path: Path) -> None:
    """On a server each rank's host time varies about the ranks' mean and a data-parallel step goes at its
    slowest rank's pace: a job of n ranks has its delays charged the expected slowest of n over the mean,
    where the calibration measured the ranks' spread (rank_jitter); one rank, or no measurement, none."""
    assert expected_max_normal(1) == 0.0
    assert expected_max_normal(2) == pytest.approx(1 / np.sqrt(np.pi), rel=1e-4)  # E[max of 2] = 1/sqrt(pi)
    assert expected_max_normal(4) == pytest.approx(1.0294, abs=1e-4)
    assert rank_wait(0.1, 4) == pytest.approx(1.10294, abs=1e-4) and rank_wait(0.1, 1) == 1.0
    path = tmp_path / "c.json"
    path.write_text(json.dumps({"machines": {"X": {"slowdown": 2.0, "rank_jitter": 0.1}, "Y": {"slowdown": 2.0}}}))
    assert host_model("X", path).rank_wait == 1.0 and host_model("X", path).delay_factor == 2.0
    four = host_model("X", path, ranks=4)
    assert four.slowdown == 2.0 and four.delay_factor == pytest.approx(2.0 * 1.10294, abs=1e-3)
    assert host_model("Y", path, ranks=4).delay_factor == 2.0
    # A job's replay charges the delays the whole factor: as a slowdown that large would.
    trace, job = loop_job(tmp_path)
    (a,) = job.replay(HostModel(2.0, {}, 0.0, rank_wait=1.5))
    (b,) = job.replay(HostModel(3.0, {}, 0.0))
    (c,) = job.replay(HostModel(2.0, {}, 0.0))
    assert step_host_times_ns(trace, a, 3) == step_host_times_ns(trace, b, 3) != step_host_times_ns(trace, c, 3)
    # The committed calibration has the H100's measured, and a recorded trace's host none.
    committed = host_model("H100-SXM-80GB", ranks=2)
    assert committed.rank_wait > 1.0 and committed.as_recorded().rank_wait == 1.0



def test_a_job_of_several_ranks_runs_at_its_machines_pace(tmp_path: Path) -> None:
    """A job of several ranks runs on a machine of several GPUs, whose host is not the single-GPU servers' the
    factors were fitted on: its delays are charged the node factor the calibration fitted (none for one rank),
    as a slowdown that much larger would charge them; and the fit picks the factor that brings the median
    configuration to its measured step."""
    path = tmp_path / "c.json"
    path.write_text(json.dumps({"machines": {"X": {"slowdown": 2.0, "node_slowdown": 1.25}, "Y": {"slowdown": 2.0}}}))
    assert host_model("X", path).delay_factor == 2.0 and host_model("X", path).node_slowdown == 1.0
    assert host_model("X", path, ranks=2).delay_factor == pytest.approx(2.5)
    assert host_model("Y", path, ranks=2).delay_factor == 2.0
    trace, job = loop_job(tmp_path)
    (a,) = job.replay(HostModel(2.0, {}, 0.0, node_slowdown=1.5))
    (b,) = job.replay(HostModel(3.0, {}, 0.0))
    assert step_host_times_ns(trace, a, 3) == step_host_times_ns(trace, b, 3)
    # Three configurations whose predicted step grows with the factor; their measured steps ask for 1.2,
    # 1.2 and 1.4: the median configuration's, 1.2.
    steps = np.array([NODE_SLOWDOWNS * k for k in (1.0, 2.0, 3.0)])
    assert fit_node_slowdown(steps, [1.2, 2.4, 4.2]) == pytest.approx(1.2)
    # Any factor between two configurations asking 1.1 and 1.3 fits as well: the nearest to 1 is kept.
    assert fit_node_slowdown(steps[:2], [1.1, 2.6]) == pytest.approx(1.1)
    with pytest.raises(ValueError):
        fit_node_slowdown(steps, [1.2, 2.4])
    # Two device-bound configurations (their steps hardly follow the factor) that ask 0.85 do not outvote
    # the host-bound one asking 1.2: a configuration counts as much as its step follows its host.
    flat = np.array([2.0 * NODE_SLOWDOWNS**0.05, 3.0 * NODE_SLOWDOWNS**0.05])
    assert fit_node_slowdown(np.vstack([steps[0], flat]), [1.2, 2.0 * 0.85**0.05, 3.0 * 0.85**0.05]) == \
        pytest.approx(1.2)


def test_server_call_costs_price_the_replayed_host(tmp_path: Path) -> None:
    measured = {"kernel": 4000.0, "memset": 1000.0, "blas": 9000.0}
    assert server_call_ns(measured) == {int(Kind.KERNEL): 4000.0, int(Kind.MEMSET): 1000.0,
                                        int(Kind.BLAS): 9000.0, int(Kind.DNN): 9000.0}
    # A cuDNN call measured on its own keeps its own price.
    assert server_call_ns({**measured, "dnn": 7000.0})[int(Kind.DNN)] == 7000.0
    trace = read_trace(loop_trace(tmp_path / "r.mayatrace", slower_ns=1000))
    calls = server_call_ns(measured)
    (r,) = simulate([trace], [{}], lambda *_: 0.0, host_slowdown=2.0, call_ns=calls, default_call_ns=0.0)
    # Step s: its gaps doubled, 2 x (60 + 3 s + 5) us, plus three launches of 4 us on the server.
    assert step_host_times_ns(trace, r, 3) == pytest.approx([154_000.0, 160_000.0, 166_000.0])


def test_slowdown_follows_the_emulating_cpu(tmp_path: Path) -> None:
    host = HostModel(3.0, {}, 0.0, reference_probe_ns=1000.0)
    # Delays emulated on a CPU twice as slow as the calibrating one are worth half as much.
    assert host.on_cpu(2000.0).slowdown == pytest.approx(1.5)
    assert host.on_cpu(None) is host and HostModel(3.0).on_cpu(2000.0).slowdown == 3.0
    path = tmp_path / "c.json"
    path.write_text(json.dumps({"emulating_cpu": {"host_probe_ns": 800.0},
                                "machines": {"X": {"slowdown": 2.0, "configs": 3}}}))
    assert host_model("X", path).reference_probe_ns == 800.0
    assert host_model("X", path).on_cpu(400.0).slowdown == pytest.approx(4.0)
    # The committed calibration names its CPU's probe, so that predictions elsewhere rescale.
    assert json.loads(CALIBRATION.read_text())["emulating_cpu"]["host_probe_ns"] > 0


@pytest.mark.emulation
def test_cpu_probe_times_an_emulated_step(tmp_path: Path) -> None:
    out = tmp_path / "job"
    opts = EmulateOptions(gpu="H100-SXM-80GB", out=out, command=["true"])
    env = build_env(opts, catalog.lookup(opts.gpu), find_library(), "probe-test")
    ns = cpu_probe.measure(env, cpu=min(os.sched_getaffinity(0)))
    assert ns is not None and 1e4 < ns < 1e8  # ns per training step of the small MLP (0.3 ms on a 2-CPU VM)
    assert not out.exists()  # its trace is not the job's
    assert cpu_probe.measure(env, python="/nonexistent/python3") is None


def test_a_disturbed_probe_is_taken_again(monkeypatch: pytest.MonkeyPatch) -> None:
    reference = json.loads(CALIBRATION.read_text())["emulating_cpu"]["host_probe_ns"]
    assert cpu_probe.reference_ns() == reference  # found through the installed package
    taken: list[int] = []

    def again(ns: float | None) -> Callable[[], float | None]:
        return lambda: taken.append(1) or ns  # type: ignore[func-returns-value]

    assert cpu_probe.steadier(1.1 * reference, again(1.0)) == 1.1 * reference and not taken  # usual: once
    assert cpu_probe.steadier(1.8 * reference, again(reference)) == reference  # a burst during the first
    assert cpu_probe.steadier(2.0 * reference, again(2.1 * reference)) == 2.0 * reference  # a slower CPU
    assert cpu_probe.steadier(None, again(None)) is None and len(taken) == 3
    monkeypatch.setattr(cpu_probe, "reference_ns", lambda: None)  # no calibration: always twice
    assert cpu_probe.steadier(500.0, again(400.0)) == 400.0


@pytest.mark.emulation
@pytest.mark.parametrize("wall_clock", [False, True])
def test_time_off_the_cpu_between_calls_is_left_out(tmp_path: Path, wall_clock: bool) -> None:
    """Between two kernels the script sleeps 300 ms (off the CPU), between the next two it spins
    until it has used 300 ms of CPU (on it): the trace clock keeps the spin and leaves the sleep
    out, and the header and the summary say how much; ``MAYA_WALL_CLOCK=1`` keeps both.  The
    script's own clocks bound each gap, so a CPU shared with other processes changes nothing."""
    from emulated import run_emulated

    script = """
import json, time, torch
x = torch.ones(4, device="cuda")
marks = []
def mark():
    marks.append(time.perf_counter())
    torch.cuda.synchronize()
    marks.append(time.perf_counter())
    x.add_(1)
mark(); time.sleep(0.3); mark()
cpu = time.process_time()  # the process's CPU time, as the trace clock counts it
while time.process_time() - cpu < 0.3:
    pass
mark()
print(json.dumps(marks))
"""
    began = time.monotonic()
    r = run_emulated(script, tmp_path, env={"MAYA_WALL_CLOCK": "1"} if wall_clock else {})
    lifetime = time.monotonic() - began  # the traced process's lifetime, and then some
    assert r.returncode == 0, r.output
    marks = json.loads(r.stdout.strip().splitlines()[-1])
    # From the call of one synchronisation to the return of the next: wall time around each gap.
    wall_slept, wall_spun = marks[3] - marks[0], marks[5] - marks[2]
    trace = read_trace(r.trace_path())
    syncs = trace.of_kind(Kind.DEVICE_SYNC)[-3:]
    t, dur = trace.records["t_ns"], trace.records["dur_ns"]
    slept, spun = (int(t[b]) - int(t[a] + dur[a]) for a, b in zip(syncs[:-1], syncs[1:], strict=True))
    assert 0.29e9 <= spun <= wall_spun * 1e9
    off = trace.header["off_cpu_us"] / 1e6
    if wall_clock:
        assert 0.3e9 <= slept <= wall_slept * 1e9 and off == 0
    else:
        assert slept < 0.02e9 and 0.29 < off < lifetime
        assert r.rank0["off_cpu_seconds"] == pytest.approx(off)
        assert re.search(r"\(0\.\d s off the CPU( and [0-9.]+ s in garbage collections)?"
                         r"( and [0-9.]+ s in device-value work)? left out\)", r.stdout + r.stderr)


def _run_timed_pause(script: str, tmp_path: Path, env: dict[str, str] | None = None) -> tuple[EmulatedRun, float, Trace, int]:
    """Emulates a script that prints the wall seconds of some host work between its last two device
    synchronisations: (the run, those seconds, its trace, the trace-clock ns from the return of the
    second-last synchronisation to the call of the last)."""
    from emulated import run_emulated

    r = run_emulated(script, tmp_path, env=env or {})
    assert r.returncode == 0, r.output
    took = json.loads(r.stdout.strip().splitlines()[-1])
    trace = read_trace(r.trace_path())
    a, b = trace.of_kind(Kind.DEVICE_SYNC)[-2:]
    return r, took, trace, int(trace.records["t_ns"][b]) - int(trace.records["t_ns"][a] + trace.records["dur_ns"][a])


@pytest.mark.emulation
@pytest.mark.parametrize("wall_clock", [False, True])
def test_garbage_collections_are_left_out_of_the_clock(tmp_path: Path, wall_clock: bool) -> None:
    """A full collection over a million tracked lists between two synchronisations is left out
    of the trace clock (the start-up hook brackets it for the interposer), and the header and
    the summary say how much; ``MAYA_WALL_CLOCK=1`` keeps it."""
    script = """
import gc, json, time, torch
junk = [[i] for i in range(1_000_000)]
x = torch.ones(4, device="cuda")
torch.cuda.synchronize()
began = time.perf_counter()
gc.collect()
took = time.perf_counter() - began
torch.cuda.synchronize()
print(json.dumps(took))
"""
    r, took, trace, gap = _run_timed_pause(script, tmp_path, {"MAYA_WALL_CLOCK": "1"} if wall_clock else None)
    gc_s = trace.header["gc_us"] / 1e6
    assert r.rank0["gc_seconds"] == pytest.approx(gc_s)
    if wall_clock:
        assert gap >= took * 1e9 and gc_s == 0
    else:
        assert took > 0.02 and gap < 0.2 * took * 1e9 and gc_s >= 0.9 * took
        assert r.rank0["off_cpu_seconds"] < gc_s  # a collection is not time off the CPU


@pytest.mark.emulation
def test_the_hooks_own_work_is_left_out_apart_from_collections(tmp_path: Path) -> None:
    """``maya_hook_pause`` (the start-up hook's device-value work) leaves its span out of the trace
    clock and counts it in ``hook_us`` / ``hook_seconds``; a collection inside it counts as the
    hook's, not twice."""
    script = """
import ctypes, gc, json, time, torch
gc.disable()  # the one collection is the explicit one, inside the pause
pause = ctypes.PyDLL(None).maya_hook_pause
pause.argtypes, pause.restype = [ctypes.c_int], None
junk = [[i] for i in range(300_000)]
x = torch.ones(4, device="cuda")
torch.cuda.synchronize()
began = time.perf_counter()
pause(1)
while time.perf_counter() - began < 0.1:
    pass
gc.collect()
pause(0)
took = time.perf_counter() - began
torch.cuda.synchronize()
print(json.dumps(took))
"""
    r, took, trace, gap = _run_timed_pause(script, tmp_path)
    hook_s = trace.header["hook_us"] / 1e6
    assert r.rank0["hook_seconds"] == pytest.approx(hook_s)
    # hook_us is the process's CPU time over the pause (every thread's): another thread's moment of work inside
    # it can put it a little over the wall time the script measured around the pause
    assert gap < 0.2 * took * 1e9 and 0.9 * took <= hook_s <= 1.05 * took
    assert trace.header["gc_us"] / 1e6 < 0.1 * took  # the nested collection is the hook's


def test_the_committed_node_factors_are_the_fitted_ones() -> None:
    """predictor/host_calibration.json's node_slowdown is what benchmarks.calibration.node_host fitted, as saved
    in benchmarks/results/node_host.json (a hand edit of either fails here)."""
    fitted = json.loads((ROOT / "benchmarks" / "results" / "node_host.json").read_text())["machines"]
    committed = json.loads(CALIBRATION.read_text())["machines"]
    assert fitted and {gpu for gpu, m in committed.items() if "node_slowdown" in m} == set(fitted)
    for gpu, m in fitted.items():
        assert committed[gpu]["node_slowdown"] == pytest.approx(m["node_slowdown"], abs=1e-3)
        assert host_model(gpu, ranks=2).node_slowdown == committed[gpu]["node_slowdown"]


def test_each_calibration_size_is_judged_with_a_node_factor_fitted_without_it() -> None:
    """benchmarks.calibration.node_host: the factor over every configuration, and each configuration's
    fitted on the others alone (so that step_accuracy judges no DDP size with a factor that saw it)."""
    from benchmarks.calibration.node_host import fit_each

    curves = np.array([NODE_SLOWDOWNS * k for k in (1.0, 2.0, 3.0)])
    every, alone = fit_each(curves, [1.2, 2.4, 4.5])  # they ask for 1.2, 1.2 and 1.5
    assert every == pytest.approx(1.2)
    # Left out, the third's factor comes from the first two (1.2); the first's from 1.2 and 1.5: the nearer 1.
    assert alone == pytest.approx([1.2, 1.2, 1.2])
    _, alone = fit_each(curves, [1.0, 2.6, 4.5])  # 1.0, 1.3, 1.5
    assert alone == pytest.approx([1.3, 1.0, 1.0])
    assert fit_each(curves[:1], [1.3])[1] == [1.0]  # one configuration alone: nothing to fit it on


def test_a_gemm_of_a_shape_new_to_the_rank_costs_the_host_cublas_kernel_search(tmp_path: Path) -> None:
    """A mixture of experts sizes GEMMs by token counts that change every step: each new shape costs the
    server's host a kernel search the emulated libraries never make, charged by its inputs' precision; a
    shape seen before (the warm-up's, every step) costs nothing more, and a recorded trace has the cost in
    its calls already."""
    bf16 = read_trace(moe_like_trace(tmp_path / "b.mayatrace"))
    blas = bf16.of_kind(Kind.BLAS)
    assert first_gemm_shapes(bf16)[blas].tolist() == [1] + [0, 1] * 8  # warm-up, then seen and new each step
    fp32 = read_trace(moe_like_trace(tmp_path / "f.mayatrace", a_type=0))
    assert first_gemm_shapes(fp32)[blas].tolist() == [2] + [0, 2] * 8
    assert not first_gemm_shapes(fp32)[np.setdiff1d(np.arange(len(fp32.records)), blas)].any()  # BLAS calls only
    untyped = read_trace(moe_like_trace(tmp_path / "u.mayatrace", a_type=0xFF))  # no type recorded: the cheaper
    assert first_gemm_shapes(untyped)[blas].tolist() == [2] + [0, 2] * 8
    host = HostModel(call_ns={}, default_call_ns=0.0, new_gemm_shape_ns={"16-bit": 150_000.0, "32-bit": 15_000.0})

    def steps_ns(trace: Trace, model: HostModel) -> list[float]:
        (r,) = simulate([trace], [{}], lambda *_: 0.0, call_ns={}, default_call_ns=0.0,
                        call_extra_ns=[model.new_shape_costs(first_gemm_shapes(trace))])
        return step_host_times_ns(trace, r, 6)

    bare = HostModel(call_ns={}, default_call_ns=0.0)
    for trace, extra in ((bf16, 150_000.0), (fp32, 15_000.0)):
        assert np.subtract(steps_ns(trace, host), steps_ns(trace, bare)) == pytest.approx([extra] * 6)
    assert host.as_recorded().new_gemm_shape_ns == {}
    # maya predict's replay charges it: the committed calibration has the H100's measured cost
    job = one_rank_job(bf16, tmp_path)
    committed = host_model("H100-SXM-80GB")
    assert committed.new_gemm_shape_ns["16-bit"] > 50_000
    (charged,), (plain,) = job.replay(committed), job.replay(replace(committed, new_gemm_shape_ns={}))
    assert np.subtract(step_host_times_ns(bf16, charged, 6), step_host_times_ns(bf16, plain, 6)) == pytest.approx(
        [committed.new_gemm_shape_ns["16-bit"]] * 6)


def test_the_committed_new_shape_costs_are_the_measured_ones() -> None:
    """predictor/host_calibration.json's new_gemm_shape_ns is what benchmarks.calibration.new_shape computes from
    benchmarks/data/gemm_first_shape/."""
    from benchmarks.calibration.new_shape import measurements, new_shape_ns

    for gpu, m in json.loads(CALIBRATION.read_text())["machines"].items():
        measured = new_shape_ns(measurements(gpu))
        assert measured["16-bit"] > 5 * measured["32-bit"]  # cuBLAS's search for a bf16 kernel costs the most
        assert m["new_gemm_shape_ns"] == measured
    assert {p.name.split("-k")[0] for p in measurements("H200-SXM-141GB")} == {"H200-SXM-141GB"}  # its own



def test_the_committed_rnn_call_costs_are_the_sweep_s_fits() -> None:
    """predictor/host_calibration.json's rnn_call_ns is what benchmarks.calibration.rnn_host fits on
    benchmarks/data/rnn_sweep/ (every run of the GPU), and the fit is a host time: the per-step part alone
    of a 3 x 1024 LSTM over 128 steps takes milliseconds, as the sweep measured (6.2-9.4 ms forward)."""
    from benchmarks.calibration.rnn_host import rnn_call_ns, runs

    for gpu, m in json.loads(CALIBRATION.read_text())["machines"].items():
        assert runs(gpu), gpu
        assert m["rnn_call_ns"] == rnn_call_ns(gpu)
        per_call, per_layer, per_step = m["rnn_call_ns"]["rnn_fwd"]
        assert 6e6 < per_call + 3 * per_layer + 3 * 128 * per_step < 10e6
    assert {p.stem for p in runs("H200-SXM-141GB")} == {"H200-SXM-141GB", "H200-SXM-141GB-b", "H200-SXM-141GB-c",
                                                      "H200-SXM-141GB-d"}
