"""Ranks that outnumber the emulating CPUs slow each other's host delays beyond the time they wait, which the
trace clock leaves out: the prediction reads how much each waited and undoes what its CPU's other ranks did
(maya/cpu_sharing.py); other work's share is only read."""

import json
import os
from pathlib import Path

import pytest
from emulated import host_steps, requires_library, run_emulated
from loops import loop_trace

from benchmarks.calibration.cpu_sharing import busy_cpus
from maya import cpu_sharing
from maya.predict import predict_folder
from maya.predictor.replay.host import quiet_gap_scales, steady_step_delays
from maya.predictor.trace import read_trace

ROOT = Path(__file__).resolve().parent.parent
MS = 1_000_000


def test_waiting_is_read_over_rising_pairs_inside_the_steady_steps() -> None:
    # [trace clock, yardstick, on a CPU, waiting]: 40 ms on, 40 ms waiting a pair inside [100, 300] ms
    inside = [[t * MS, 1, k * 40 * MS, k * 40 * MS] for k, t in enumerate((100, 150, 200, 250, 300))]
    before = [[50 * MS, 1, 0, 0]]  # outside: its pair with the first inside does not count
    stepped_back = [[400 * MS, 1, 5000 * MS, 0], [120 * MS, 1, 5040 * MS, 5000 * MS]]  # stamps fall: left out
    assert cpu_sharing.waiting(before + inside, 100 * MS, 300 * MS) == pytest.approx(1.0)
    samples = inside[:3] + stepped_back + [[260 * MS, 1, 5080 * MS, 5000 * MS]]
    # the pair (120, 260) rises and is inside: 40 ms on the CPU and none waiting, beside the first two pairs
    assert cpu_sharing.waiting(samples, 100 * MS, 300 * MS) == pytest.approx(80 / 120)
    assert cpu_sharing.waiting([s[:2] for s in inside], 100 * MS, 300 * MS) == 0.0  # no counters
    assert cpu_sharing.waiting(inside[:1], 100 * MS, 300 * MS) == 0.0  # too little run
    # steady steps too short to hold two samples: the whole run's pairs
    assert cpu_sharing.waiting(before + inside, 310 * MS, 320 * MS) == pytest.approx(1.0)


def test_a_rank_that_waited_for_its_cpu_is_steadied_with_its_delays_undone(tmp_path: Path) -> None:
    """Two ranks doing the same work, the second twice as slow and on a CPU it waited for: with its factor of
    0.4, it sets the quickest step both are priced at (0.8 of the first's)."""
    fast, slow = (read_trace(loop_trace(tmp_path / f"{n}.mayatrace", steps=6, pace=p))
                  for n, p in (("fast", 1.0), ("slow", 2.0)))
    quickest = min(steady_step_delays(fast)[2])
    for factors, expected in (([1.0, 1.0], quickest), ([1.0, 0.4], 0.8 * quickest)):
        for trace, scale in zip((fast, slow), quiet_gap_scales([fast, slow], factors), strict=True):
            order, spans, totals = steady_step_delays(trace)
            for (a, b), total in zip(spans, totals, strict=True):
                assert scale[order[a:b]] == pytest.approx(expected / total)


def test_the_factor_is_the_calibrations_and_undoes_only_the_ranks_waiting() -> None:
    fitted = json.loads((ROOT / "benchmarks" / "results" / "cpu_sharing.json").read_text())
    assert cpu_sharing.SLOWDOWN_PER_WAITING == fitted["slowdown_per_waiting"] > 0
    c = fitted["slowdown_per_waiting"]
    assert cpu_sharing.delay_factor(1.0, 1) == 1.0  # a CPU of its own: its waiting was other work's
    assert cpu_sharing.delay_factor(1.0, 2) == pytest.approx(1 / (1 + c))
    assert cpu_sharing.delay_factor(2.5, 2) == pytest.approx(1 / (1 + c))  # beyond the one other rank: other work
    assert cpu_sharing.delay_factor(3.0, 4) == pytest.approx(1 / (1 + 2 * c))  # each doubling as much again
    assert cpu_sharing.delay_factor(7.0, 8) == pytest.approx(1 / (1 + 3 * c))


def test_ranks_take_the_cpus_in_turn() -> None:
    assert [cpu_sharing.ranks_on_cpu(r, 4, 2) for r in range(4)] == [2, 2, 2, 2]
    assert [cpu_sharing.ranks_on_cpu(r, 3, 2) for r in range(3)] == [2, 1, 2]
    assert [cpu_sharing.ranks_on_cpu(r, 2, 4) for r in range(2)] == [1, 1]
    assert cpu_sharing.ranks_on_cpu(0, 2, 0) == 1  # CPUs not known


STEPS = host_steps(30, 0.008)


@pytest.mark.emulation
@requires_library
def test_an_emulation_beside_busy_processes_reads_its_waiting(tmp_path: Path) -> None:
    """Alone, the job's main thread hardly waits for its CPU; with a CPU-bound process on every CPU it waits
    about as long as it runs, and the prediction says so, leaving its delays as they are (other work's)."""
    (tmp_path / "alone").mkdir()
    (tmp_path / "shared").mkdir()
    alone = run_emulated(STEPS, tmp_path / "alone")
    with busy_cpus():
        shared = run_emulated(STEPS, tmp_path / "shared")
    assert alone.returncode == 0 and shared.returncode == 0, alone.output + shared.output
    (w_alone,) = predict_folder(alone.out_dir, "H100-SXM-80GB").cpu_waiting
    p = predict_folder(shared.out_dir, "H100-SXM-80GB")
    (w_shared,) = p.cpu_waiting
    assert w_alone < 0.2 and 0.6 < w_shared < 2.0, (w_alone, w_shared)
    assert p.cpu_delay_factors == (1.0,)


@pytest.mark.emulation
@requires_library
@pytest.mark.skipif(len(os.sched_getaffinity(0)) > 2, reason="needs ranks that outnumber the CPUs: at most two")
def test_ranks_that_outnumber_the_cpus_have_their_delays_undone(tmp_path: Path) -> None:
    """Four ranks on this machine's CPUs share them two by two: each waits about as long as it runs, and the
    prediction shortens their delays by the calibrated factor and says so."""
    script = STEPS.replace("import time, torch", "import os, time, torch\nimport torch.distributed as dist\n"
                           "dist.init_process_group('nccl')\ntorch.cuda.set_device(int(os.environ['LOCAL_RANK']))")
    r = run_emulated(script, tmp_path, torchrun_nproc=4, gpus_per_node=4)
    assert r.returncode == 0, r.output
    p = predict_folder(r.out_dir, "H100-SXM-80GB")
    assert all(0.6 < w < 2.5 for w in p.cpu_waiting), p.cpu_waiting
    ranks = 2 if len(os.sched_getaffinity(0)) == 2 else 4
    assert p.cpu_delay_factors == pytest.approx([cpu_sharing.delay_factor(w, ranks) for w in p.cpu_waiting])
    assert all(f < 0.9 for f in p.cpu_delay_factors)
