"""Calibration: the code that writes the data ``maya predict`` loads, one entry point per table.

- ``python -m benchmarks.calibration.host``: ``predictor/host_calibration.json`` (the GPU server's host), to
  which ``rank_wait --write`` and ``node_host --write`` add the hosts of jobs of several ranks (and whose
  cost of a new GEMM shape ``new_shape --write`` rewrites from its data alone);
- ``python -m benchmarks.calibration.sharing --write``: ``predictor/sharing.json`` (work beside NCCL kernels);
- ``python -m benchmarks.calibration.collectives --write``: ``predictor/collectives.json`` (measured collectives);
- ``python -m benchmarks.calibration.profiles CAMPAIGN_DIR``: ``predictor/profiles/<GPU>/`` (kernel profiles).
"""

from __future__ import annotations

import json
from collections.abc import Mapping

from maya.predictor.replay.host import CALIBRATION


def set_host_values(key: str, values: Mapping[str, object]) -> None:
    """Put ``key`` = value into each calibrated machine of ``predictor/host_calibration.json`` (by GPU;
    GPUs it has no entry for are left out), keeping the rest of the table."""
    calibration = json.loads(CALIBRATION.read_text())
    for gpu, value in values.items():
        if gpu in calibration.get("machines", {}):
            calibration["machines"][gpu][key] = value
    CALIBRATION.write_text(json.dumps(calibration, indent=1) + "\n")
    print(f"saved {CALIBRATION}")
