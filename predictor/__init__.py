"""Maya predictor (``maya.predictor``): reads emulation traces and predicts timings.

- :mod:`maya.predictor.trace`: reader and writer of the binary trace format
  (``emulation-image/TRACE_FORMAT.md``).
"""
