#!/usr/bin/env python3
"""Host cost of a GEMM whose shape the process has not run before, against one it has.

Runs on a GPU machine with its own python3 and torch (about a minute):

    python3 benchmarks/campaigns/gemm_first_shape.py --out "$OUT/gemm_first_shape.json"

A job whose GEMM sizes follow its data (a mixture of experts whose experts
get a different number of tokens every step) asks cuBLAS for shapes it has
not seen; a job of fixed sizes asks for the same few every step.  For each
form of a linear layer's GEMMs (forward ``x @ w.T`` with and without bias, and
the backward's two products), in bf16 and fp32, this times the host's time in
``torch`` for the first call of each of ``--shapes`` fresh row counts, and for
a call of a row count already run.  The device is idle before each call (a
synchronisation), so the time is the host's own, not a wait for a full queue.
Prints and saves the medians per form and dtype, and every sample.
"""
import argparse
import json
import platform
import random
import statistics
import time

import torch

FORMS = {
    # name: (the call, given x [m, k], w [n, k], bias [n], g [m, n])
    "linear": lambda x, w, b, g: torch.nn.functional.linear(x, w),
    "linear_bias": lambda x, w, b, g: torch.nn.functional.linear(x, w, b),
    "grad_input": lambda x, w, b, g: g @ w,  # [m, n] @ [n, k]
    "grad_weight": lambda x, w, b, g: g.t() @ x,  # [n, m] @ [m, k]
}


def host_us(form, x, w, b, g, m) -> float:
    """The host's time for ``form`` on the first ``m`` rows (slicing included), the device idle before."""
    torch.cuda.synchronize()
    t = time.perf_counter()
    form(x[:m], w, b, g[:m])
    took = time.perf_counter() - t
    torch.cuda.synchronize()
    return took * 1e6


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--shapes", type=int, default=60, help="fresh row counts per form and dtype")
    ap.add_argument("--k", type=int, default=768)
    ap.add_argument("--n", type=int, default=3072)
    args = ap.parse_args()
    rng = random.Random(0)
    fresh = rng.sample(range(1000, 5000), 8 * args.shapes)  # never repeated across forms and dtypes
    results = {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__, "cuda": torch.version.cuda,
               "cpu": platform.processor() or platform.machine(), "k": args.k, "n": args.n, "cases": {}}
    for dtype in (torch.bfloat16, torch.float32):
        x = torch.randn(5000, args.k, device="cuda", dtype=dtype)
        w = torch.randn(args.n, args.k, device="cuda", dtype=dtype)
        b = torch.randn(args.n, device="cuda", dtype=dtype)
        g = torch.randn(5000, args.n, device="cuda", dtype=dtype)
        for name, form in FORMS.items():
            seen = 4096
            for _ in range(5):  # warm: the seen shape, and the library's first-call costs
                form(x[:seen], w, b, g[:seen])
            first, again = [], []
            for _ in range(args.shapes):
                m = fresh.pop()
                first.append(host_us(form, x, w, b, g, m))
                again.append(host_us(form, x, w, b, g, seen))
            key = f"{name}/{str(dtype).removeprefix('torch.')}"
            results["cases"][key] = {"first_us": first, "seen_us": again,
                                     "first_median_us": statistics.median(first),
                                     "seen_median_us": statistics.median(again)}
            print(f"{key:24} new shape {statistics.median(first):8.1f} us   seen shape "
                  f"{statistics.median(again):6.1f} us", flush=True)
    with open(args.out, "w") as f:
        json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
