"""A question whose every emulation ran in a slow phase of the emulating CPU is told by what the yardstick
usually reads on this machine (maya/usual_pace.py): it asks for its spares, and says so."""

import json
import time
from pathlib import Path

import pytest
from test_slow_phase import FAST, ask, run

from maya.predict import SLOW_PHASE, SPARE
from maya.usual_pace import MIN_READINGS, WITHIN_S, UsualPace


@pytest.fixture(autouse=True)
def judged_by_the_machine(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MAYA_USUAL_PACE", raising=False)  # the test suite turns it off elsewhere


def test_maya_usual_pace_0_turns_it_off(monkeypatch, tmp_path):
    usual = UsualPace(tmp_path / "pace" / "node.json")
    usual.remember({f"e#{k}": FAST for k in range(MIN_READINGS)})
    assert usual.reading() == FAST
    monkeypatch.setenv("MAYA_USUAL_PACE", "0")
    assert usual.reading() is None


def usual_at(tmp_path: Path, ns: int, count: int = MIN_READINGS) -> UsualPace:
    usual = UsualPace(tmp_path / "pace" / "node.json")
    usual.remember({f"before#{k}": ns for k in range(count)})
    return usual


def test_the_usual_reading_is_a_low_quantile_of_the_last_days_readings(tmp_path):
    usual = UsualPace(tmp_path / "pace" / "node.json")
    usual.remember({f"quick#{k}": FAST for k in range(MIN_READINGS - 1)})
    assert usual.reading() is None  # too few to judge a question by
    usual.remember({f"quick#{k}": FAST for k in range(MIN_READINGS - 1)})  # the same readings, asked again
    assert usual.reading() is None
    slow = {f"slow#{k}": int(1.6 * FAST) for k in range(20)}
    usual.remember(slow | {"not read#0": 0})  # a slow stretch; 0: a rank not read
    assert usual.reading() == FAST  # the quick phases' level holds while a fifth of the readings are quick
    usual.remember({f"slower#{k}": int(1.6 * FAST) for k in range(100)})
    assert usual.reading() == int(1.6 * FAST)  # a machine that stays slow becomes the usual
    later = time.time() + WITHIN_S + 120
    assert usual.reading(now=later) is None  # forgotten after a day


def test_a_broken_or_unwritable_store_leaves_the_question_to_itself(tmp_path):
    store = tmp_path / "pace" / "node.json"
    store.parent.mkdir()
    store.write_text("{not json")
    usual = UsualPace(store)
    assert usual.reading() is None
    usual.remember({f"e#{k}": FAST for k in range(MIN_READINGS)})  # a broken store is replaced
    assert usual.reading() == FAST and len(json.loads(store.read_text())) == MIN_READINGS
    blocked = tmp_path / "file"
    blocked.write_text("")
    UsualPace(blocked / "node.json").remember({"e#0": FAST})  # its folder cannot be made: no error
    taken = tmp_path / "taken" / "node.json"  # a folder where the store goes: the new file cannot replace it
    (taken / "x").mkdir(parents=True)
    UsualPace(taken).remember({"e#0": FAST})
    assert not list(taken.parent.glob("*.tmp"))  # and none is left half-written beside it


def test_the_node_names_the_store(monkeypatch, tmp_path):
    monkeypatch.setenv("MAYA_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("MAYA_NODE_NAME", "cpu-node/7")
    assert UsualPace.here().path == tmp_path / "pace" / "cpu-node_7.json"


def test_a_question_slow_throughout_asks_for_its_spares_and_says_so(monkeypatch, tmp_path):
    usual = usual_at(tmp_path, FAST)
    slow = [run(0.130 + k / 1000, [2 * FAST]) for k in range(6)]  # each agrees with the others' pace
    p, made = ask(monkeypatch, tmp_path, slow, usual=usual)
    assert made == 3 + SPARE and p.slow_phase_s == ()  # none quicker: all kept
    assert p.pace_over_usual == pytest.approx(2.0) and p.to_json()["pace_over_usual"] == pytest.approx(2.0)
    # Its interval reaches down to where the host's share would be at the usual pace (the step follows its
    # host 0.8; the yardstick read twice as slow): 1 - 0.8 * (1 - 1/2) of the answer.
    low, high = p.interval_s
    assert low == pytest.approx(0.6 * p.step_time_s) and high > p.step_time_s
    # Without the machine's readings the same emulations look calm: two agreeing ones settle it.
    p, made = ask(monkeypatch, tmp_path, slow)
    assert made == 2 and p.pace_over_usual is None and p.interval_s[0] > 0.65 * p.step_time_s


def test_a_spare_in_a_quick_phase_sets_the_slow_ones_aside(monkeypatch, tmp_path):
    usual = usual_at(tmp_path, FAST)
    runs = [run(0.130, [2 * FAST]), run(0.131, [2 * FAST]), run(0.100, [FAST]), run(0.1005, [FAST])]
    p, made = ask(monkeypatch, tmp_path, runs, usual=usual)
    assert made == 4 and p.slow_phase_s == (0.130, 0.131) and p.step_time_s == 0.100
    assert p.pace_over_usual == pytest.approx(1.0)


def test_a_question_at_the_usual_pace_is_asked_as_before_and_leaves_its_readings(monkeypatch, tmp_path):
    usual = usual_at(tmp_path, FAST)
    runs = [run(0.100, [int(1.1 * FAST), FAST]), run(0.1005, [FAST, FAST])]
    p, made = ask(monkeypatch, tmp_path, runs, usual=usual)
    assert made == 2 and p.pace_over_usual == pytest.approx(1.0) and p.pace_over_usual <= SLOW_PHASE
    assert len(json.loads(usual.path.read_text())) == MIN_READINGS + 4


def test_a_device_bound_or_repeated_question_is_not_judged_by_the_machine(monkeypatch, tmp_path):
    usual = usual_at(tmp_path, FAST)
    p, made = ask(monkeypatch, tmp_path, [run(0.1, [2 * FAST], host=0.02)], usual=usual)
    assert made == 1 and p.pace_over_usual is None
    runs = [run(0.130 + k / 1000, [2 * FAST]) for k in range(3)]
    p, made = ask(monkeypatch, tmp_path, runs, usual=usual, repeat=2)
    assert made == 2 and p.pace_over_usual is None


def test_maya_predict_says_when_every_emulation_ran_slow(monkeypatch, tmp_path, capsys):
    from maya import cli, predict

    monkeypatch.setenv("MAYA_CACHE_DIR", str(tmp_path / "cache"))
    UsualPace.here().remember({f"before#{k}": FAST for k in range(MIN_READINGS)})
    slow = iter([run(0.130 + k / 1000, [2 * FAST]) for k in range(5)])
    by_folder: dict[Path, object] = {}
    monkeypatch.setattr(cli, "_cmd_emulate", lambda args, command: 0)
    monkeypatch.setattr(predict, "predict_folder", lambda folder, gpu, **_: by_folder.setdefault(folder, next(slow)))
    out_dir = tmp_path / "out"
    assert cli.main(["predict", "--gpu", "H100-SXM-80GB", "--out", str(out_dir), "--", "python", "train.py"]) == 0
    out = capsys.readouterr().out
    assert len(by_folder) == 3 + SPARE and "median of 5 emulations" in out
    assert "every emulation ran its steps in a slow phase of the emulating CPU (Python at 2.00 times" in out
