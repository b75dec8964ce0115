"""Maya: predict the time and memory of a PyTorch training job on GPUs you do not have.

The job runs unmodified on a CPU host under an interposer that emulates the
GPUs (``maya emulate``); the predictor turns the recorded trace into timings.

Public surface:

- :mod:`maya.catalog`: the virtual GPU catalog (``gpus.json``).
- :mod:`maya.emulate`: run a command under the emulated GPUs and summarise it.
- :mod:`maya.predictor`: trace reader and performance models.
"""

__version__ = "0.1.0"
