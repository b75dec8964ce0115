"""The 90% interval of a prediction: the calibration cases' error percentile, widened by the job's own spread."""

import json
from pathlib import Path

import pytest

from maya.predict import Prediction

ROOT = Path(__file__).resolve().parents[1]


def prediction(steps, emulations=()):
    return Prediction("H100-SXM-80GB", 0.1, tuple(steps), {}, [1], 2, {}, tuple(emulations))


def test_the_interval_is_the_methods_width_when_the_job_is_steady():
    q90 = json.loads((ROOT / "predictor" / "uncertainty.json").read_text())["method_q90"]
    low, high = prediction([0.1, 0.1, 0.1]).interval_s
    assert (low, high) == pytest.approx((0.1 * (1 - q90), 0.1 * (1 + q90)))


def test_disagreeing_steps_and_emulations_widen_it():
    steady = prediction([0.1, 0.1]).interval_s
    wobbly = prediction([0.09, 0.11], [0.1, 0.12]).interval_s
    assert wobbly[0] < steady[0] and wobbly[1] > steady[1]
    js = prediction([0.1]).to_json()
    assert js["step_time_low_s"] < js["step_time_s"] < js["step_time_high_s"]


def test_the_table_is_what_the_calibration_entry_point_computes():
    from benchmarks.calibration.uncertainty import table

    assert json.loads((ROOT / "predictor" / "uncertainty.json").read_text())["method_q90"] == table()["method_q90"]
