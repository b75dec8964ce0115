#!/usr/bin/env python3
"""Each step's peak allocated memory of a training script, on a GPU: where in the run its peak falls.

    python3 benchmarks/campaigns/step_peaks.py SCRIPT [ARGS...] > peaks.json

Runs SCRIPT in this process with ``torch.cuda.synchronize`` wrapped: at every call it notes
``max_memory_allocated`` since the previous call and resets the peak, so a loop that synchronises
around each step (as the held-out workloads do) gives one peak per step, its set-up before the
first.  Prints one JSON line: the peaks in call order (bytes).  The script's own output goes to
stderr.  Why: a job whose real peak exceeds its emulated one in the first steps only (cuDNN's
autotuning tries its candidates' workspaces there) differs from one whose every step does.
"""
import contextlib
import json
import runpy
import sys

import torch

peaks = []
_sync = torch.cuda.synchronize


def synchronize(device=None):
    _sync(device)
    peaks.append(torch.cuda.max_memory_allocated())
    torch.cuda.reset_peak_memory_stats()


torch.cuda.synchronize = synchronize
sys.argv = sys.argv[1:]
with contextlib.redirect_stdout(sys.stderr):
    runpy.run_path(sys.argv[0], run_name="__main__")
print(json.dumps({"script": sys.argv, "step_peaks_bytes": peaks}))
