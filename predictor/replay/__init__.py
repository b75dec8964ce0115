"""Replay: the discrete-event simulation of a job's ranks on the target machines, and what it yields.

- :mod:`~maya.predictor.replay.simulator`: every rank's host, streams and collectives, replayed;
- :mod:`~maya.predictor.replay.engine`: the replay's compiled loop;
- :mod:`~maya.predictor.replay.host`: the GPU server's host, relative to the emulating CPU;
- :mod:`~maya.predictor.replay.network`: how long a collective takes (measured curves, else NCCL's algorithms);
- :mod:`~maya.predictor.replay.sharing`: what a resident NCCL kernel costs the work beside it;
- :mod:`~maya.predictor.replay.iterations`: the steady training steps of a trace, from its repeating structure;
- :mod:`~maya.predictor.replay.step`: a replay's steady step time, its breakdown and timeline.
"""
