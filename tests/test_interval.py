"""The 90% interval of a prediction: the calibration side's error percentiles, each weighed by how much
the step follows its source, widened by the job's own spread and, from one emulation, by its noise."""

import json
import math
from dataclasses import replace
from pathlib import Path

import pytest
from emulated import requires_library, run_emulated
from loops import loop_trace

from maya import predict
from maya.predict import Prediction, predict_folder
from maya.predictor.estimate.estimators import Estimate

ROOT = Path(__file__).resolve().parents[1]
TABLE = json.loads((ROOT / "predictor" / "uncertainty.json").read_text())


def prediction(steps, emulations=(), sensitivity=None):
    return Prediction("H100-SXM-80GB", 0.1, tuple(steps), {}, [1], 2, {}, tuple(emulations),
                      sensitivity=sensitivity or {})


def test_the_interval_is_the_methods_width_when_the_job_is_steady_and_follows_nothing_unknown():
    low, high = prediction([0.1, 0.1, 0.1]).interval_s
    q90 = TABLE["method_q90"]
    assert (low, high) == pytest.approx((0.1 * (1 - q90), 0.1 * (1 + q90)))


def test_disagreeing_steps_and_emulations_widen_it():
    steady = prediction([0.1, 0.1]).interval_s
    wobbly = prediction([0.09, 0.11], [0.1, 0.12]).interval_s
    assert wobbly[0] < steady[0] and wobbly[1] > steady[1]
    js = prediction([0.1]).to_json()
    assert js["step_time_low_s"] < js["step_time_s"] < js["step_time_high_s"]


def test_steps_of_different_work_widen_it_only_by_what_steps_of_one_work_disagree_on():
    """Batches bucketed by length (128, 256, 384 tokens in turn) take 20, 37 and 51 ms: real differences of
    their work, not uncertainty. Of steps that do the same work, only their own disagreement counts."""
    steps = [0.037, 0.051, 0.020, 0.0372, 0.0514, 0.0201]
    works = [0.030, 0.045, 0.015, 0.030, 0.045, 0.015]
    bucketed = Prediction("H100-SXM-80GB", 0.037, tuple(steps), {}, [1], 2, {}, steps_work_s=tuple(works))
    steady = Prediction("H100-SXM-80GB", 0.037, (0.037,) * 6, {}, [1], 2, {})
    wobbly = Prediction("H100-SXM-80GB", 0.037, (0.037, 0.0374) * 3, {}, [1], 2, {})
    assert steady.interval_s[1] < bucketed.interval_s[1] == pytest.approx(wobbly.interval_s[1])
    assert predict.own_spread(steps, works, ()) == pytest.approx(0.0004)
    # Every step of one work, or each of a work of its own (a packed batch's random lengths): all steps count.
    assert predict.own_spread(steps, [0.03] * 6, ()) == pytest.approx(0.0314)
    assert predict.own_spread(steps, [0.01 * k for k in range(1, 7)], ()) == pytest.approx(0.0314)
    assert predict.own_spread(steps, (), [0.036, 0.038]) == pytest.approx(0.0314)
    # Emulations that disagree count whatever the steps do.
    assert predict.own_spread(steps, works, [0.036, 0.038]) == pytest.approx(0.002)


def test_a_step_that_follows_its_host_or_unmeasured_kernels_gets_their_errors():
    host_bound = prediction([0.1], sensitivity={"host": 1.0, "estimated": 0.0}).interval_s
    half = math.hypot(TABLE["method_q90"], TABLE["host_q90"]["H100-SXM-80GB"], TABLE["emulation_q90"])
    assert host_bound == pytest.approx((0.1 * (1 - half), 0.1 * (1 + half)))
    # From several emulations that agree, their own noise is not added again.
    agreed = prediction([0.1], [0.1, 0.1, 0.1], sensitivity={"host": 1.0, "estimated": 0.0}).interval_s
    half = math.hypot(TABLE["method_q90"], TABLE["host_q90"]["H100-SXM-80GB"])
    assert agreed == pytest.approx((0.1 * (1 - half), 0.1 * (1 + half)))
    estimated = prediction([0.1], sensitivity={"host": 0.0, "estimated": 0.5}).interval_s
    half = math.hypot(TABLE["method_q90"], 0.5 * TABLE["kernel_q90"])
    assert estimated == pytest.approx((0.1 * (1 - half), 0.1 * (1 + half)))


def test_a_step_that_follows_its_rnn_calls_host_gets_the_fit_s_error():
    """A cuDNN RNN call's host time is a fit on the RNN sweep (benchmarks.calibration.rnn_host), off by
    rnn_host_q90 on sizes left out of it: a step that follows it is that much less sure."""
    assert 0.05 < TABLE["rnn_host_q90"] < 1.0
    paced = prediction([0.1], sensitivity={"host": 0.0, "estimated": 0.0, "rnn_host": 0.5})
    half = math.hypot(TABLE["method_q90"], 0.5 * TABLE["rnn_host_q90"])
    assert paced.interval_s == pytest.approx((0.1 * (1 - half), 0.1 * (1 + half)))
    from maya.cli import interval_lines

    assert "cuDNN RNN calls' host time 50%" in interval_lines(paced)[0]
    assert "RNN" not in interval_lines(prediction([0.1], sensitivity={"host": 0.1, "rnn_host": 0.0}))[0]


def test_the_table_is_what_the_calibration_entry_point_computes():
    from benchmarks.calibration.uncertainty import table

    assert TABLE == table()


class _Estimators:
    """Kernel 1 runs ``ns`` and was estimated from a fit; kernels 2 and 3 run 1 us, measured."""

    def __init__(self, ns: float) -> None:
        self.ns = ns

    def estimate_many(self, ops):
        return [Estimate(self.ns, "gemm:test", "fitted", "gemm") if op.name == "kernel_1"
                else Estimate(1000.0, "measured", "measured", "memory") for op in ops]


@pytest.mark.parametrize("kernel_ns, host, estimated", [(10e6, 0.0, 1.0), (1000.0, 0.9, 0.0)])
def test_the_sensitivities_say_what_sets_the_step(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                 kernel_ns: float, host: float, estimated: float) -> None:
    """A step of one 10 ms estimated kernel follows it and not its host; a step of 1 us kernels, the reverse
    (its host delays, not the calls' costs: those follow the call costs, not the slowdown)."""
    monkeypatch.setattr(predict, "_estimators", lambda gpu: _Estimators(kernel_ns))
    (tmp_path / "job").mkdir()
    loop_trace(tmp_path / "job" / "rank0.mayatrace", 6)
    p = predict_folder(tmp_path / "job", "H100-SXM-80GB")
    assert p.sensitivity == pytest.approx({"host": host, "estimated": estimated, "rnn_host": 0.0}, abs=0.1)


def test_maya_predict_says_how_to_steady_a_host_bound_step():
    from maya.cli import interval_lines

    bound = interval_lines(prediction([0.1], sensitivity={"host": 0.8, "estimated": 0.1}))
    assert "follows its host 80%" in bound[0] and "'--repeat 1'" in bound[1] and "between servers" in bound[2]
    assert len(interval_lines(prediction([0.1], sensitivity={"host": 0.05, "estimated": 0.1}))) == 1
    # A step that follows its host a third: one emulation's noise moves it, the servers' hosts less so.
    third = interval_lines(prediction([0.1], sensitivity={"host": 0.33, "estimated": 0.1}))
    assert len(third) == 2 and "'--repeat 1'" in third[1]
    # Repeated emulations steady the emulation's noise, not the servers'.
    repeated = interval_lines(prediction([0.1], [0.1, 0.1, 0.1], sensitivity={"host": 0.8}))
    assert len(repeated) == 2 and "between servers" in repeated[1]


@pytest.mark.parametrize("host, repeat, further, emulations", [
    (0.8, [], [0.3, 0.1], 3), (0.3, [], [0.3, 0.1], 3), (0.05, [], [0.3, 0.1], 1), (0.8, ["--repeat", "1"], [0.3], 1),
    (0.05, ["--repeat", "2"], [0.3], 2),
    (0.8, [], [0.1009, 0.3], 2),  # the second agrees with the first (0.1) within 1%: the median of three lies between
    (0.8, ["--repeat", "3"], [0.1009, 0.3], 3),  # asked for three: three
])
def test_maya_predict_emulates_a_host_bound_step_three_times(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                             capsys: pytest.CaptureFixture[str], host: float,
                                                             repeat: list[str], further: list[float],
                                                             emulations: int) -> None:
    """At the default settings, a step that follows its host is emulated up to twice more and the median kept
    (one emulating process can run every host delay twice as slow), a third not where the second agrees with the
    first; a device-bound one, once; --repeat decides."""
    from maya import cli

    done: list[Path] = []
    step = iter(further)

    def emulate(args, command):
        done.append(args.out)
        return 0

    def predict_one(folder, gpu, **kw):
        return prediction([0.1], sensitivity={"host": host, "estimated": 0.0}) if folder == tmp_path else \
            Prediction("H100-SXM-80GB", next(step), (0.1,), {}, [1], 2, {}, sensitivity={"host": host})

    monkeypatch.setattr(cli, "_cmd_emulate", emulate)
    monkeypatch.setattr(predict, "predict_folder", predict_one)
    assert cli.main(["predict", "--gpu", "H100-SXM-80GB", "--json", *repeat, "--out", str(tmp_path), "--",
                     "python", "train.py"]) == 0
    out = capsys.readouterr()
    assert done == [tmp_path, *(tmp_path / f"run{k}" for k in range(1, emulations))]
    assert len(json.loads(out.out)["emulations_step_time_s"]) == emulations
    assert ("emulating once or twice more" in out.err) == (host >= 0.1 and not repeat)
    assert ("two emulations agree within 1%" in out.err) == (emulations == 2 and not repeat)
    each = json.loads(out.out)["emulations_step_time_s"]
    assert json.loads(out.out)["step_time_s"] == sorted(each)[(len(each) - 1) // 2]


def test_a_further_emulation_that_fails_ends_maya_predict_with_its_exit_code(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """The first emulation of a host-bound step completed, the second crashed: the command's own exit code,
    and the line that says nothing was predicted (no answer from half the emulations asked for)."""
    from maya import cli

    codes = iter([0, 3])
    monkeypatch.setattr(cli, "_cmd_emulate", lambda args, command: next(codes))
    monkeypatch.setattr(predict, "predict_folder",
                        lambda folder, gpu, **kw: prediction([0.1], sensitivity={"host": 0.8, "estimated": 0.0}))
    assert cli.main(["predict", "--gpu", "H100-SXM-80GB", "--json", "--out", str(tmp_path), "--",
                     "python", "train.py"]) == 3
    out = capsys.readouterr()
    assert out.out == "" and "did not complete under emulation (exit 3)" in out.err


@pytest.mark.emulation
@requires_library
def test_an_emulated_loop_over_length_buckets_is_sure_of_its_step(tmp_path: Path) -> None:
    """Three sizes in turn: each step's work is its size's (equal for steps of one size), and the interval
    holds what steps of one size disagree on, not the sizes' different times."""
    script = """
import torch
w = torch.randn(2048, 2048, device="cuda")
for step in range(12):
    x = torch.randn((512, 2048, 4096)[step % 3], 2048, device="cuda")
    for _ in range(4):
        x = torch.relu(x @ w)
    torch.cuda.synchronize()
"""
    run = run_emulated(script, tmp_path)
    assert run.returncode == 0, run.output
    p = predict_folder(run.trace_path().parent, "H100-SXM-80GB")
    assert len(p.steps_work_s) == len(p.steps_s) >= 6
    by_work = sorted(zip(p.steps_work_s, p.steps_s, strict=True))
    assert by_work[-1][0] > 4 * by_work[0][0]  # 4096 rows against 512
    works = sorted({round(w, 9) for w in p.steps_work_s})
    assert len(works) == 3  # one work per size, the same in every step of it
    assert max(p.steps_s) - min(p.steps_s) > 0.5 * p.step_time_s
    assert predict.own_spread(p.steps_s, p.steps_work_s, ()) < 0.05 * p.step_time_s
    unknown_work = replace(p, steps_work_s=())  # every step's time counted as uncertainty
    assert p.interval_s[1] < unknown_work.interval_s[1] - 0.2 * p.step_time_s
