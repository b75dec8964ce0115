"""The jobs of a profiling campaign: name -> command line (after the Python
interpreter, from the repository root).  The GPU machine records them
(profile_campaign.py); the CPU host emulates the same command lines
(build_profiles.py), and the two traces are joined operation by operation."""

from __future__ import annotations

from benchmarks.step_truth import measured, with_steps

STEPS = 3  # the examples: step 0 warms up, steps 1-2 are steady

_SWEEPS = ("gemm", "attention", "dnn", "memory", "copy", "gemm-grid", "attention-grid", "attention-mask",
           "conv-modern", "embedding", "scatter")
_EXAMPLES = {
    "gpt": ["examples/gpt.py"],
    "cnn": ["examples/cnn.py"],
    "bert": ["examples/bert.py"],
    "recommender": ["examples/recommender.py"],
}
# Sizes never used in fitting: how well the estimators generalise to new models.
_HELD_OUT = {
    "gpt-d128": ["examples/gpt.py", "--n-layer", "6", "--n-embd", "1024", "--n-head", "8", "--seq-len", "2048",
                 "--batch", "4"],
    "bert-large": ["examples/bert.py", "--n-layer", "8", "--hidden", "1024", "--heads", "16", "--seq-len", "256",
                   "--batch", "32"],
    "cnn-wide": ["examples/cnn.py", "--batch", "32", "--width", "96", "--image-size", "192"],
    "recommender-wide": ["examples/recommender.py", "--dim", "256", "--batch", "8192"],
}

JOBS: dict[str, list[str]] = {"smoke": ["benchmarks/campaigns/profiling/smoke.py"]}
JOBS.update({f"sweep-{p}": ["benchmarks/campaigns/profiling/sweep.py", "--part", p] for p in _SWEEPS})
JOBS.update({f"example-{n}": [*argv, "--steps", str(STEPS)] for n, argv in _EXAMPLES.items()})
JOBS.update({f"held-out-{n}": [*argv, "--steps", str(STEPS)] for n, argv in _HELD_OUT.items()})

# The step-time configurations measured on the H100 (benchmarks/data/step_times), recorded for
# ORACLE_STEPS steps with their own printed step times: the oracle's ground truth (step_accuracy.py).
ORACLE_STEPS = 8
JOBS.update({f"oracle-{m.name}": with_steps(m.argv, ORACLE_STEPS) for m in measured("H100-SXM-80GB")})
