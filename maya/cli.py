"""The ``maya`` command line.

    maya emulate --gpu NAME [--gpus N] [--gpus-per-node M] --out DIR -- COMMAND...
    maya gpus
    maya summary DIR
    maya trace FILE
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path

from maya import catalog


def _split_command(argv: list[str]) -> tuple[list[str], list[str]]:
    """Split at the first ``--``: our options before it, the command after."""
    if "--" in argv:
        i = argv.index("--")
        return argv[:i], argv[i + 1 :]
    return argv, []


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="maya", description="Plan GPU jobs by emulating the GPUs on a CPU host.")
    sub = p.add_subparsers(dest="cmd", required=True)
    e = sub.add_parser(
        "emulate",
        help="run a command on emulated GPUs",
        usage="maya emulate --gpu NAME [--gpus N] [--gpus-per-node M] --out DIR -- COMMAND...",
        description="Run COMMAND (python or torchrun) unchanged on emulated GPUs, "
        "trace every device operation into DIR and summarise the run.",
    )
    e.add_argument("--gpu", required=True, help="catalog name (see 'maya gpus'), case-insensitive")
    e.add_argument("--gpus", type=int, default=None, help="GPUs visible to each process (default: --gpus-per-node)")
    e.add_argument("--gpus-per-node", type=int, default=None, help="GPUs per virtual node (default 8)")
    e.add_argument("--out", required=True, type=Path, help="output folder for traces and summary.json")
    sub.add_parser("gpus", help="list the GPU catalog")
    s = sub.add_parser("summary", help="summarise the output folder of an earlier run again")
    s.add_argument("dir", type=Path)
    t = sub.add_parser("trace", help="print a trace file's header and record counts")
    t.add_argument("file", type=Path)
    return p


def _cmd_gpus() -> int:
    rows = [("NAME", "DEVICE NAME", "CC", "SMS", "MEMORY", "BF16 TFLOP/S", "HBM GB/S")]
    for g in catalog.all_gpus():
        rows.append(
            (
                g.name,
                g.marketing,
                str(g.fields["cc"]),
                str(g.sm_count),
                f"{g.memory_bytes / 2**30:.1f} GiB",
                f"{g.fields['peak_tflops']['bf16']:g}",
                f"{g.fields['mem_bw_gbps']:g}",
            )
        )
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for r in rows:
        print("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip())
    return 0


def _cmd_emulate(args: argparse.Namespace, command: list[str]) -> int:
    from maya.emulate import EmulateError, EmulateOptions, emulate

    try:
        return emulate(
            EmulateOptions(
                gpu=args.gpu, out=args.out, command=command, gpus=args.gpus, gpus_per_node=args.gpus_per_node
            )
        )
    except catalog.UnknownGPU as e:
        print(f"maya: unknown GPU {e.name!r}. Valid names:", file=sys.stderr)
        for name in e.valid:
            print(f"  {name}", file=sys.stderr)
        return 2
    except EmulateError as e:
        print(f"maya: {e}", file=sys.stderr)
        return 2


def _cmd_summary(directory: Path) -> int:
    from maya.summary import render, summarize

    previous = directory / "summary.json"
    old = json.loads(previous.read_text()) if previous.is_file() else {}
    gpu = old.get("gpu") or {"name": "?", "memory_bytes": 0}
    summary = summarize(directory, gpu=gpu, exit_code=old.get("exit_code"), command=old.get("command", []))
    for line in render(summary):
        print(line)
    return 0


def _cmd_trace(path: Path) -> int:
    from maya.predictor.trace import read_trace

    t = read_trace(path)
    print(json.dumps(t.header))
    print(f"{len(t)} records, {len(t.strings)} strings, {t.span_ns / 1e9:.3f} s")
    for name, n in sorted(t.kind_counts().items(), key=lambda kv: -kv[1]):
        print(f"  {name:24} {n}")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    ours, command = _split_command(list(sys.argv[1:] if argv is None else argv))
    args = _parser().parse_args(ours)
    if args.cmd == "emulate":
        return _cmd_emulate(args, command)
    if command:
        print(f"maya {args.cmd}: unexpected arguments after '--'", file=sys.stderr)
        return 2
    if args.cmd == "gpus":
        return _cmd_gpus()
    if args.cmd == "summary":
        return _cmd_summary(args.dir)
    return _cmd_trace(args.file)


if __name__ == "__main__":
    sys.exit(main())
