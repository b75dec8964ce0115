"""Maya predictor (``maya.predictor``): from emulation traces to step times, in three layers.

- :mod:`maya.predictor.trace`: the trace format, its reader, typed record decoders, the device
  operations of a trace, and trace diff;
- :mod:`maya.predictor.estimate`: kernel-time estimation (profile tables, features, fitted models,
  roofline fallback);
- :mod:`maya.predictor.replay`: the discrete-event replay of every rank's host, streams and
  collectives, with the host and network models, and the steady step it yields.

Each layer imports only the ones listed before it (``make importlint`` checks it).  The data the
replay loads (host calibration, collective curves, sharing factors) and the profile tables sit
beside this file.
"""
