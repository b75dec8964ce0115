"""Maya predictor (``maya.predictor``): reads emulation traces and predicts timings.

- :mod:`maya.predictor.trace`: reader and writer of the binary trace format
  (``emulation-image/TRACE_FORMAT.md``).
- :mod:`maya.predictor.ops`: a trace's device operations without run-specific ids, and their measured times.
- :mod:`maya.predictor.align`: operation-by-operation alignment of two traces of the same script.
- :mod:`maya.predictor.diff`: ``maya trace diff``, the report on such an alignment.
- :mod:`maya.predictor.profiles`: profile tables (emulated features joined with recorded times).
- :mod:`maya.predictor.roofline`: a catalog GPU's time for some FLOPs and bytes at its peaks.
- :mod:`maya.predictor.features`: what the estimators know of an operation (family, work, features).
- :mod:`maya.predictor.estimators`: kernel-time estimators fitted on the profile tables, and their evaluation.
- :mod:`maya.predictor.iterations`: the steady training steps of a trace, from its repeating structure.
- :mod:`maya.predictor.network`: how long a collective takes (measured curves, else NCCL's algorithms).
- :mod:`maya.predictor.sharing`: what a resident NCCL kernel costs the work beside it.
- :mod:`maya.predictor.host`: the GPU server's host, relative to the emulating CPU.
- :mod:`maya.predictor.simulator`: the discrete-event replay of every rank's host, streams and collectives.
- :mod:`maya.predictor.step`: a replay's steady step time, its breakdown and timeline.
"""
