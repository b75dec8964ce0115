"""The predictor container of an emulation pod: ``python -m maya.operator.pod``.

It waits for the training container's exit code, checks that the image's
PyTorch and CUDA are ones the interposer emulates (a wrong prediction is
worse than none), summarises the traces, predicts each GPU of the
architecture and writes one small JSON object, under the 4 KiB a termination
message holds, to ``/dev/termination-log``: the operator reads it from the
pod's status, so the user's pod needs no API access.
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
import time
from pathlib import Path
from typing import Any

from maya import catalog
from maya.plan.evaluate import predict_gpus, run_result
from maya.summary import summarize

# What the interposer is built for: CUDA 13's runtime ABI and cudaDeviceProp layout, as torch 2.11+cu130 uses them.
SUPPORTED_CUDA_MAJOR = "13"
SUPPORTED = "PyTorch 2.x built for CUDA 13 (torch 2.11.0+cu130 is the reference)"
MESSAGE_BYTES = 4000


def version_problem(versions: str) -> str | None:
    """Why the image cannot be emulated faithfully, from ``torch.__version__ torch.version.cuda`` (or no-torch)."""
    words = versions.split()
    if not words:
        return None
    if words[0] == "no-torch":
        found = " ".join(words[1:]) or "its Python"
        return f"the image has no PyTorch ({found}); Maya emulates {SUPPORTED}"
    if len(words) < 2:
        return None
    torch_version, cuda = words[0], words[1]
    if cuda == "none":
        return f"the image's PyTorch {torch_version} is a CPU-only build; Maya emulates {SUPPORTED}"
    if cuda.split(".")[0] != SUPPORTED_CUDA_MAJOR:
        return (f"the image has PyTorch {torch_version} built for CUDA {cuda}; the interposer emulates CUDA "
                f"{SUPPORTED_CUDA_MAJOR}.x only ({SUPPORTED}), so its prediction would be wrong")
    return None


def compact(result: dict[str, Any], predictions: dict[str, dict[str, Any]]) -> str:
    """The termination message: the result and, per GPU, what the plan needs (steps and breakdown left out)."""
    keep = ("stepTimeSeconds", "stepTimeSecondsLow", "stepTimeSecondsHigh", "peakMemoryBytes", "hostSensitivity",
            "steadyPaceNs", "hostProbeNs", "error")
    preds = {g: {k: v for k, v in p.items() if k in keep} for g, p in predictions.items()}
    out = {"result": result, "predictions": preds}
    text = json.dumps(out, separators=(",", ":"))
    if len(text.encode()) > MESSAGE_BYTES and "error" in result:
        room = max(200, len(result["error"]) - (len(text.encode()) - MESSAGE_BYTES) - 20)
        result = {**result, "error": "..." + result["error"][-room:]}
        text = json.dumps({"result": result, "predictions": preds}, separators=(",", ":"))
    return text


def evaluate(out: Path, gpu: str, predict_for: list[str], gpus_per_node: int, command: list[str]) -> str:
    code = int((out / "exit-code").read_text().strip() or 1)
    traces = out / "traces"
    traces.mkdir(exist_ok=True)
    log = (out / "log.txt").read_text(errors="replace")[-20000:] if (out / "log.txt").exists() else ""
    versions = (out / "versions.txt").read_text() if (out / "versions.txt").exists() else ""
    g = catalog.lookup(gpu)
    summary = summarize(traces, gpu={"name": g.name, "marketing": g.marketing, "memory_bytes": g.memory_bytes,
                                     "usable_bytes": g.memory_bytes - g.reserved_bytes,
                                     "gpus_per_process": gpus_per_node, "gpus_per_node": gpus_per_node},
                        exit_code=code, command=command)
    try:
        summary["host_probe_ns"] = float((out / "probe-ns.txt").read_text().split()[-1])
    except (OSError, ValueError, IndexError):
        summary["host_probe_ns"] = None
    (traces / "summary.json").write_text(json.dumps(summary, indent=1) + "\n")
    problem = version_problem(versions)
    if problem is not None:
        result = {"status": "failed", "error": problem, "exitCode": code, "peakReservedBytes": 0,
                  "peakAllocatedBytes": 0, "unsupportedImage": True}
        return compact(result, {})
    result = run_result(traces, code, log)
    predictions = predict_gpus(traces, predict_for, gpus_per_node) if result["status"] == "ok" else {}
    return compact(result, predictions)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m maya.operator.pod", description=__doc__.splitlines()[0])
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--gpu", required=True)
    p.add_argument("--predict-for", required=True, help="comma-separated GPU names")
    p.add_argument("--gpus-per-node", type=int, required=True)
    p.add_argument("--timeout", type=float, default=3600.0)
    p.add_argument("--command", default="")
    p.add_argument("--termination-log", type=Path, default=Path("/dev/termination-log"))
    args = p.parse_args(argv)
    deadline = time.monotonic() + args.timeout
    while not (args.out / "exit-code").exists():
        if time.monotonic() > deadline:
            print("maya: the training container wrote no exit code in time", file=sys.stderr)
            return 1
        time.sleep(1.0)
    try:
        text = evaluate(args.out, args.gpu, args.predict_for.split(","), args.gpus_per_node,
                        shlex.split(args.command))
    except Exception as e:  # noqa: BLE001 - whatever breaks, the operator must get a readable failure
        text = compact({"status": "failed", "error": f"the predictor failed: {e!r}", "exitCode": -1,
                        "peakReservedBytes": 0, "peakAllocatedBytes": 0}, {})
    print(text)
    try:
        args.termination_log.write_text(text)
    except OSError as e:
        print(f"maya: cannot write {args.termination_log}: {e}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
