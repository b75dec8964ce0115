"""The events of a ``torch.profiler`` run, as its Chrome trace lists them (campaign scripts on the GPU machine).

The profiler's own event objects lack what the Chrome trace carries for
kernels (the grid, the launch's correlation id), so the campaigns read the
exported trace.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any


def profiler_events(prof: Any) -> list[dict[str, Any]]:
    """``traceEvents`` of the finished ``torch.profiler.profile`` ``prof``."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "trace.json"
        prof.export_chrome_trace(str(path))
        return list(json.loads(path.read_text())["traceEvents"])
