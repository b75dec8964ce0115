"""Kernel-time estimation: how long each device operation takes on a catalog GPU.

- :mod:`~maya.predictor.estimate.profiles`: profile tables (emulated operations joined with recorded times);
- :mod:`~maya.predictor.estimate.kernel_names`: what a kernel's name says (class, element type...);
- :mod:`~maya.predictor.estimate.work`: an operation's family, domain, FLOPs and bytes;
- :mod:`~maya.predictor.estimate.roofline`: a catalog GPU's time for some FLOPs and bytes at its peaks;
- :mod:`~maya.predictor.estimate.rnn`: a cuDNN RNN call as the GEMMs and pointwise kernels it amounts to;
- :mod:`~maya.predictor.estimate.features`: the numbers the models are fitted on;
- :mod:`~maya.predictor.estimate.fit`: fitting one family's model;
- :mod:`~maya.predictor.estimate.estimators`: the fitted estimators of a GPU and their estimates;
- :mod:`~maya.predictor.estimate.cache`: fits kept on disk;
- :mod:`~maya.predictor.estimate.loading`: estimators for any catalog GPU, own or borrowed;
- :mod:`~maya.predictor.estimate.evaluation`: errors on held-out profile points, and their report.

The names below are what ``maya estimators`` and ``maya predict`` use.
"""

from maya.predictor.estimate.cache import cache_dir
from maya.predictor.estimate.estimators import Estimate, Estimators
from maya.predictor.estimate.evaluation import evaluate, render
from maya.predictor.estimate.loading import load

__all__ = ["Estimate", "Estimators", "cache_dir", "evaluate", "load", "render"]
