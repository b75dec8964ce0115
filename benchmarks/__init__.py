"""Measurements, GPU campaigns and the calibration that writes the predictor's data.

- :mod:`benchmarks.calibration`: one entry point per table that ``maya predict`` loads;
- :mod:`benchmarks.campaigns`: scripts that run on a GPU machine and bring back ground truth
  (under ``benchmarks/data/``);
- the modules here: measurements of Maya against that ground truth and of its own speed, and the
  readers of the committed ground truth they share with the calibration.

Run them from the repository root as modules (``python -m benchmarks.step_accuracy``); results
go to ``benchmarks/results/``.
"""
