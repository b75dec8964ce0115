"""An emulation whose samples of the Python yardstick in its steady steps read slow ran them in one of the
emulating CPU's slow phases: ``maya predict`` sets it aside and emulates again (maya/_hook/_maya_pace.py)."""

import json
from dataclasses import replace
from pathlib import Path

import pytest
from emulated import host_steps, requires_library, run_emulated
from loops import loop_trace

from maya import predict
from maya.predict import SPARE, Prediction, predict_asked, quickest_pace, slow_phase, steady_pace
from maya.predictor.replay.iterations import trace_steps
from maya.predictor.trace import read_trace

FAST = 300_000


def run(step_s: float, paces: list[int], host: float = 0.8) -> Prediction:
    return Prediction("H100-SXM-80GB", step_s, (step_s,), {}, [1], 2, {}, sensitivity={"host": host},
                      steady_pace_ns=tuple(paces))


def ask(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, runs: list[Prediction], **kw):  # type: ignore[no-untyped-def]
    """predict_asked over ``runs`` in order; returns its answer and how many it emulated."""
    folders = [tmp_path / f"e{k}" for k in range(len(runs))]
    by_folder = dict(zip(folders, runs, strict=True))
    made = [folders[0]]

    def further(k: int) -> Path:
        made.append(folders[k])
        return folders[k]

    monkeypatch.setattr(predict, "predict_folder", lambda folder, gpu, **_: by_folder[folder])
    return predict_asked(folders[0], "H100-SXM-80GB", further, known=runs[0], **kw), len(made)


def test_a_rank_whose_steady_steps_read_slow_marks_the_emulation():
    calm = run(0.1, [FAST, int(1.2 * FAST)])
    slow = run(0.13, [FAST, int(1.3 * FAST)])  # rank 1's steady steps ran slow
    assert quickest_pace([calm, slow]) == FAST
    assert not slow_phase(calm, FAST) and slow_phase(slow, FAST)
    assert not slow_phase(run(0.1, [0]), FAST) and not slow_phase(slow, None)  # not read: nothing to judge
    assert quickest_pace([run(0.1, [0])]) is None


def test_only_the_samples_in_the_steady_steps_count(tmp_path):
    trace = read_trace(loop_trace(tmp_path / "rank0.mayatrace", steps=8))
    steps, records = trace_steps(trace)
    t = trace.records["t_ns"]
    lo, hi = int(t[records[steps.starts[0]]]), int(t[records[steps.starts[-1] + steps.period - 1]])
    before, inside, after = [[lo - 10, 9_000_000]], [[lo, 1], [(lo + hi) // 2, 5], [hi, 3]], [[hi + 10, 9_000_000]]
    assert steady_pace(trace, before + inside + after) == 3
    # Steady steps too short for MIN_SAMPLES take the samples nearest them: the CPU's phases last seconds.
    assert steady_pace(trace, [[lo - 10**9, 7]] + before + inside[:2] + after) == 5
    assert steady_pace(trace, inside[:2]) == 0  # too few to say


def test_a_host_bound_step_takes_its_median_from_the_calm_emulations(monkeypatch, tmp_path):
    runs = [run(0.100, [FAST]), run(0.130, [2 * FAST]), run(0.1005, [FAST])]
    p, made = ask(monkeypatch, tmp_path, runs)
    # The second is set aside; the third agrees with the first within 1%: two agreeing calm ones settle it.
    assert made == 3 and p.emulations_s == (0.100, 0.1005) and p.slow_phase_s == (0.130,)
    assert p.step_time_s == 0.100
    # Without the yardstick's readings, the same emulations give the median of all three.
    p, made = ask(monkeypatch, tmp_path, [run(r.step_time_s, [0]) for r in runs])
    assert made == 3 and p.step_time_s == 0.1005 and p.slow_phase_s == ()


def test_a_first_emulation_in_a_slow_phase_is_found_by_the_later_ones(monkeypatch, tmp_path):
    runs = [run(0.13, [2 * FAST]), run(0.100, [FAST]), run(0.102, [FAST]), run(0.101, [FAST])]
    p, made = ask(monkeypatch, tmp_path, runs)
    assert made == 4 and p.slow_phase_s == (0.13,) and p.step_time_s == 0.101


def test_when_the_slow_ones_keep_coming_no_more_than_the_spares_are_made(monkeypatch, tmp_path):
    runs = [run(0.100, [FAST])] + [run(0.12 + k / 100, [2 * FAST]) for k in range(5)]
    p, made = ask(monkeypatch, tmp_path, runs)
    assert made == 3 + SPARE  # AUTO_REPEAT wanted, SPARE more in place of slow ones
    assert p.emulations_s == (0.100,) and len(p.slow_phase_s) == 4
    # A machine that reads slow throughout (a loaded one): none is slower than the others, none set aside.
    p, made = ask(monkeypatch, tmp_path, [run(0.12 + k / 100, [3 * FAST]) for k in range(5)])
    assert made == 3 and p.slow_phase_s == () and p.step_time_s == 0.13


def test_a_device_bound_step_is_emulated_once(monkeypatch, tmp_path):
    p, made = ask(monkeypatch, tmp_path, [run(0.1, [2 * FAST], host=0.05), run(0.09, [FAST], host=0.05)])
    assert made == 1 and p.step_time_s == 0.1


def test_repeat_takes_the_emulations_asked_for(monkeypatch, tmp_path):
    runs = [run(0.1, [FAST]), run(0.2, [3 * FAST]), run(0.11, [FAST])]
    p, made = ask(monkeypatch, tmp_path, runs, repeat=3)
    assert made == 3 and p.step_time_s == 0.11 and p.slow_phase_s == ()


@requires_library
def test_the_start_up_hook_samples_the_yardstick_in_the_steady_steps(tmp_path):
    """Under the emulating interposer the hook's thread samples the yardstick every 40 ms, stamped with the trace
    clock and left out of it (counted in ``hook_seconds``), and the prediction finds the samples of the steady
    steps."""
    r = run_emulated(host_steps(25, 0.012), tmp_path)
    assert r.returncode == 0, r.output
    samples = json.loads((r.out_dir / "rank0.torch.json").read_text())["cpu_pace"]["samples"]
    assert r.rank0["cpu_pace_samples"] == len(samples) >= 5
    times = [at for at, *_ in samples]
    assert all(len(s) == 4 for s in samples)  # with the main thread's scheduler counters (maya.cpu_sharing)
    assert [s[2] for s in samples] == sorted(s[2] for s in samples)
    trace = read_trace(r.trace_path())
    assert times == sorted(times) and int(trace.records["t_ns"][0]) <= times[0]
    assert 0 < r.rank0["hook_seconds"] < 0.05 * r.rank0["host_seconds"]
    assert steady_pace(trace, samples) > 0


def test_an_emulation_probed_in_a_slow_phase_is_replayed_with_the_others_middle_reading(monkeypatch, tmp_path):
    """A probe timed in a slow phase reads slow and would shrink its emulation's delays: that emulation is replayed
    with the middle reading of the question's others (one machine's, minutes apart); the others keep theirs."""
    folders = [tmp_path / "e0", tmp_path / "e1", tmp_path / "e2", tmp_path / "e3"]
    own = {folders[0]: 700_000.0, folders[1]: 1_100_000.0, folders[2]: 650_000.0, folders[3]: 1_000_000.0}
    step = {folders[0]: 0.1, folders[1]: 0.12, folders[2]: 0.1, folders[3]: 0.1}
    replayed = []

    def predict_one(folder, gpu, probe_ns=None, **_):
        probe = probe_ns or own[folder]
        replayed.append((folder.name, probe))
        return replace(run(step[folder] * 700_000 / probe, [FAST]), host_probe_ns=probe)

    monkeypatch.setattr(predict, "predict_folder", predict_one)
    it = iter(folders[1:])
    p = predict_asked(folders[0], "H100-SXM-80GB", lambda k: next(it))
    # e1 read over 1.25 x e0's: replayed with e0's (the only other); e2 reads quickest, and nobody is replayed
    # with it; e0 and e2 keep their own.
    assert replayed == [("e0", 700_000.0), ("e1", 1_100_000.0), ("e1", 700_000.0), ("e2", 650_000.0)]
    assert sorted(p.emulations_s) == pytest.approx([0.1, 0.1 * 700 / 650, 0.12])


def test_an_emulation_whose_probe_and_steady_steps_both_read_slow_keeps_its_own_reading(monkeypatch, tmp_path):
    """Probe and delays slowed alike: replaying it with a quick reading would stretch its slow delays further (on a
    machine slow through most of a question, that made the question's answer its slowest emulation)."""
    folders = [tmp_path / f"e{k}" for k in range(5)]
    own = dict(zip(folders, [600_000.0, 1_000_000.0, 1_000_000.0, 1_000_000.0, 1_000_000.0], strict=True))
    pace = dict(zip(folders, [FAST, 2 * FAST, 2 * FAST, 2 * FAST, 2 * FAST], strict=True))
    replayed = []

    def predict_one(folder, gpu, probe_ns=None, **_):
        probe = probe_ns or own[folder]
        replayed.append((folder.name, probe))
        return replace(run(0.1 * 1_000_000 / probe if folder != folders[0] else 0.1, [pace[folder]]),
                       host_probe_ns=probe)

    monkeypatch.setattr(predict, "predict_folder", predict_one)
    it = iter(folders[1:])
    p = predict_asked(folders[0], "H100-SXM-80GB", lambda k: next(it))
    assert [probe for _, probe in replayed] == [own[f] for f in folders]  # nobody replayed
    assert p.step_time_s == 0.1 and len(p.slow_phase_s) == 4


def test_maya_predict_says_which_emulations_it_set_aside(monkeypatch, tmp_path, capsys):
    from maya import cli

    made: list[Path] = []
    runs = iter([run(0.1, [FAST]), run(0.13, [2 * FAST]), run(0.105, [FAST]), run(0.102, [FAST])])
    by_folder: dict[Path, Prediction] = {}

    def emulate(args, command):
        made.append(args.out)
        return 0

    def predict_one(folder, gpu, **_):
        return by_folder.setdefault(folder, next(runs))

    monkeypatch.setattr(cli, "_cmd_emulate", emulate)
    monkeypatch.setattr(predict, "predict_folder", predict_one)
    assert cli.main(["predict", "--gpu", "H100-SXM-80GB", "--out", str(tmp_path), "--", "python", "train.py"]) == 0
    out = capsys.readouterr()
    assert made == [tmp_path, *(tmp_path / f"run{k}" for k in range(1, 4))]
    assert "slow phase of the emulating CPU" in out.err and "emulating again in its place" in out.err
    assert "median of 3 emulations: 100.00, 105.00, 102.00 ms" in out.out
    assert "set aside, run in a slow phase of the emulating CPU: 130.00 ms" in out.out
