"""Calibration: the code that writes the data ``maya predict`` loads, one entry point per table.

- ``python -m benchmarks.calibration.host``: ``predictor/host_calibration.json`` (the GPU server's host);
- ``python -m benchmarks.calibration.sharing --write``: ``predictor/sharing.json`` (work beside NCCL kernels);
- ``python -m benchmarks.calibration.collectives --write``: ``predictor/collectives.json`` (measured collectives);
- ``python -m benchmarks.calibration.profiles CAMPAIGN_DIR``: ``predictor/profiles/<GPU>/`` (kernel profiles).
"""
