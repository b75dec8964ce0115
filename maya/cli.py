"""The ``maya`` command line.

    maya emulate --gpu NAME [--gpus N] [--gpus-per-node M] --out DIR -- COMMAND...
    maya record --out DIR -- COMMAND...          (on a machine with a real GPU)
    maya predict --gpu NAME [--gpus-per-node M] [--repeat K] [--json] [--timeline FILE] [--out DIR] -- COMMAND...
    maya predict --gpu NAME --from DIR [--oracle] [--json] [--timeline FILE]
    maya plan FILE [--json] [--report DIR]
    maya gpus
    maya summary DIR
    maya trace FILE
    maya trace diff A B [--json] [--limit N]
    maya estimators fit --gpu NAME
    maya estimators evaluate --gpu NAME [--json]

``trace`` takes either one file (header and record counts) or the word
``diff`` and two files: an operation-by-operation comparison of two traces of
the same script, e.g. emulated and recorded on a GPU (a file named ``diff``
is given as ``./diff``).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from maya import catalog

if TYPE_CHECKING:
    from maya.predict import Prediction


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
    r = sub.add_parser(
        "record",
        help="run a command on a real GPU, tracing it with measured device times",
        usage="maya record --out DIR -- COMMAND...",
        description="Run COMMAND unchanged on this machine's real GPU and write the same trace as 'maya emulate', "
        "with the measured device time of every kernel, copy and memset, into DIR.",
    )
    r.add_argument("--out", required=True, type=Path, help="output folder for traces and record.json")
    q = sub.add_parser(
        "predict",
        help="predict a training step's time and memory on a GPU",
        usage="maya predict --gpu NAME [--gpus-per-node M] [--repeat K] [--json] [--timeline FILE] [--out DIR] "
        "-- COMMAND...\n"
        "       maya predict --gpu NAME --from DIR [--oracle] [--json] [--timeline FILE]",
        description="Emulate COMMAND on virtual GPUs of type NAME, estimate every device operation, replay the "
        "job on its streams, hosts and network, and print the steady-state step time, where it goes, and peak "
        "memory against capacity.  --from DIR replays the traces of an earlier 'maya emulate' (or, with "
        "--oracle, of a 'maya record' on a real GPU, with its measured device times).",
    )
    q.add_argument("--gpu", required=True, help="catalog name (see 'maya gpus'), case-insensitive")
    q.add_argument("--gpus", type=int, default=None, help="GPUs visible to each process (default: --gpus-per-node)")
    q.add_argument("--gpus-per-node", type=int, default=None, help="GPUs per node (default 8)")
    q.add_argument("--out", type=Path, default=None, help="where the emulation's traces go (default: a temporary folder)")
    q.add_argument("--repeat", type=_repeat, default=None, metavar="K",
                   help="emulate K times (the first into DIR, the others into DIR/run1...) and keep the median "
                   "prediction, K times the emulation time (default: once, and once or twice more when the step follows "
                   "its host a tenth or more, whose host delays one emulation can run up to twice as slow: a third "
                   "only where the second disagrees with the first by more than 1%%)")
    q.add_argument("--from", dest="source", type=Path, default=None, help="replay this folder instead of emulating")
    q.add_argument("--oracle", action="store_true", help="with --from: use the recorded device times")
    q.add_argument("--json", action="store_true", help="print one JSON object")
    q.add_argument("--timeline", type=Path, default=None, help="write a Chrome/Perfetto trace of the replay")
    pl = sub.add_parser(
        "plan",
        help="recommend the GPU shape for a TrainingPlan",
        usage="maya plan FILE [--json] [--report DIR]",
        description="Read a TrainingPlan (the custom resource's YAML), emulate the candidate configurations it "
        "describes (shape x micro-batch x knobs) as few times as possible, predict each on its GPU, and recommend "
        "the cheapest (or fastest) that fits in memory and meets the deadline.  Emulations are cached, so a change "
        "of prices, objective or deadline re-plans in seconds.",
    )
    pl.add_argument("file", type=Path, metavar="FILE", help="the plan (YAML or JSON)")
    pl.add_argument("--json", action="store_true", help="print the status object the operator writes (camelCase)")
    pl.add_argument("--report", type=Path, default=None, metavar="DIR",
                    help="write an HTML report (time against cost, Pareto front) and the recommendation's timeline")
    sub.add_parser("gpus", help="list the GPU catalog")
    s = sub.add_parser("summary", help="summarise the output folder of an earlier run again")
    s.add_argument("dir", type=Path)
    t = sub.add_parser(
        "trace",
        help="print a trace file's header and record counts, or compare two traces",
        usage="maya trace FILE\n       maya trace diff A B [--json] [--limit N]",
        description="With FILE: its header and record counts.  With 'diff A B': align the device operations "
        "of two traces of the same script (e.g. emulated and recorded on a GPU) and report what matched, "
        "which fields differ, what only one side ran, and how much measured device time the matches cover.",
    )
    t.add_argument("files", nargs="+", type=Path, metavar="FILE")
    t.add_argument("--json", action="store_true", help="diff: print the report as JSON")
    t.add_argument("--limit", type=int, default=10, help="diff: how many examples of each difference (default 10)")
    k = sub.add_parser("estimators", help="fit the kernel-time estimators, or measure them on held-out profiles")
    k.add_argument("action", choices=("fit", "evaluate"))
    k.add_argument("--gpu", required=True, help="catalog name (see 'maya gpus'), case-insensitive")
    k.add_argument("--json", action="store_true", help="evaluate: print the full report as JSON")
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


def _repeat(text: str) -> int:
    """--repeat K: a whole number of emulations, at least one."""
    try:
        k = int(text)
    except ValueError:
        k = 0
    if k < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: give the number of emulations, 1 or more")
    return k


def _cmd_predict(args: argparse.Namespace, command: list[str]) -> int:
    import tempfile

    from maya.predict import (
        AGREE,
        AUTO_REPEAT,
        SLOW_PHASE,
        FurtherEmulationFailed,
        PredictError,
        agree,
        predict_asked,
        predict_folder,
    )
    from maya.summary import device_value_lines
    from maya.usual_pace import UsualPace

    if (args.source is None) == (not command):
        print("maya predict: give either a command after '--' or --from DIR", file=sys.stderr)
        return 2
    if args.oracle and args.source is None:
        print("maya predict: --oracle replays a recorded folder: add --from DIR", file=sys.stderr)
        return 2
    if args.repeat is not None and args.repeat > 1 and args.source is not None:
        print("maya predict: --repeat K needs a command to emulate (not --from)", file=sys.stderr)
        return 2
    out = args.source or args.out or Path(tempfile.mkdtemp(prefix="maya-predict-"))

    def emulate(folder: Path) -> int:
        args.out = folder
        rc = _cmd_emulate(args, command)
        if rc != 0:
            print(f"maya predict: the command did not complete under emulation (exit {rc}); nothing to predict",
                  file=sys.stderr)
        return rc

    def further(k: int) -> Path:
        if k == 1 and args.repeat is None:  # predict_asked wants more than one: the step follows its host
            print(f"maya predict: the step follows its host {100 * p.sensitivity['host']:.0f}%, and one "
                  "emulation's host delays can run up to twice as slow: emulating once or twice more for the "
                  "median ('--repeat 1' emulates once)", file=sys.stderr)
        elif k >= AUTO_REPEAT and args.repeat is None:  # only in place of one run in a slow phase
            print("maya predict: an emulation ran its steps in a slow phase of the emulating CPU "
                  "(docs/emulating-machine.md): emulating again in its place", file=sys.stderr)
        if (rc := emulate(out / f"run{k}")) != 0:
            raise FurtherEmulationFailed(rc)
        return out / f"run{k}"

    try:
        if args.source is None and (rc := emulate(out)) != 0:
            return rc
        # The timeline is this emulation's, unless more follow: then the median one's replaces it.
        p = predict_folder(out, args.gpu, gpus_per_node=args.gpus_per_node, oracle=args.oracle,
                           timeline=args.timeline)
        if args.source is None:
            p = predict_asked(out, args.gpu, further, repeat=args.repeat, gpus_per_node=args.gpus_per_node,
                              timeline=args.timeline, known=p, usual=UsualPace.here())
            if args.repeat is None and agree(p.emulations_s):
                print(f"maya predict: two emulations agree within {AGREE:.0%}: a third could not move their "
                      "median outside them", file=sys.stderr)
    except FurtherEmulationFailed as e:
        return int(e.args[0])
    except catalog.UnknownGPU as e:
        print(f"maya: unknown GPU {e.name!r}; see 'maya gpus'", file=sys.stderr)
        return 2
    except PredictError as e:
        print(f"maya predict: {e}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(p.to_json()))
        return 0
    ms = 1e3
    print(f"{p.gpu}: step {p.step_time_s * ms:.2f} ms (median of {len(p.steps_s)} steady steps: "
          + ", ".join(f"{s * ms:.2f}" for s in p.steps_s) + ")")
    for line in interval_lines(p):
        print(line)
    if len(p.emulations_s) > 1:
        print(f"  median of {len(p.emulations_s)} emulations: " + ", ".join(f"{s * ms:.2f}" for s in p.emulations_s)
              + " ms")
    if p.slow_phase_s:
        print("  set aside, run in a slow phase of the emulating CPU: " + ", ".join(f"{s * ms:.2f}" for s in p.slow_phase_s)
              + " ms")
    if (p.pace_over_usual or 0.0) > SLOW_PHASE:
        print(f"  note: every emulation ran its steps in a slow phase of the emulating CPU (Python at "
              f"{p.pace_over_usual:.2f} times this machine's usual pace; docs/emulating-machine.md): the host's "
              "share of this step may be long; ask again later, or on an idle machine")
    if shortened := 1 - min(p.cpu_delay_factors, default=1.0):
        print(f"  note: the emulation's ranks outnumbered its CPUs; their host delays were shortened by up to "
              f"{shortened:.0%} for what sharing a CPU slows (docs/emulating-machine.md)")
    for k, v in p.breakdown.items():
        print(f"  {k.removesuffix('_s').replace('_', ' '):24} {v * ms:9.2f} ms")
    gib = 2**30
    for r, (peak, high) in enumerate(zip(p.peak_memory_bytes, p.peak_memory_high_bytes, strict=True)):
        if peak == 0:  # 'maya record' keeps no allocations: its traces say nothing of memory
            print(f"  rank {r} peak memory: not in its trace (a recorded run's holds no allocations)")
            continue
        verdict = "fits" if high <= p.capacity_bytes else f"does NOT fit: short by {(high - p.capacity_bytes) / gib:.2f} GiB"
        some = (f" ({high / gib:.2f} GiB in runs whose NCCL watchdog still holds DDP's first gradient buckets in "
                "the second step)" if high > peak else "")
        print(f"  rank {r} peak memory {peak / gib:.2f} GiB{some} of {p.capacity_bytes / gib:.2f} GiB: {verdict}")
    if p.confidence:
        print("  device time by estimate confidence: " + ", ".join(f"{k} {100 * v:.1f}%" for k, v in p.confidence.items()))
    if p.collective_models:  # measured: NCCL timed on GPUs of this NVLink (maya/predictor/collectives.json)
        print("  collective time by model: " + ", ".join(f"{k} {100 * v:.1f}%" for k, v in p.collective_models.items()))
    if p.approximated:  # emulated or timed only approximately (emulation-image/TRACE_FORMAT.md)
        print("  approximated: " + "; ".join(f"{k} (x{n})" for k, n in p.approximated.items()))
    for line in device_value_lines(p.device_values or None):
        print(f"  {line}")
    if args.timeline:
        print(f"  timeline: {args.timeline} (open in ui.perfetto.dev)")
    return 0


def interval_lines(p: Prediction) -> list[str]:
    """The interval, what widens it, and for a step that follows its host what moves it: one emulation's
    noise (and what steadies it), and the GPU servers' own hosts, which no emulation can steady."""
    low, high = p.interval_s
    host, estimated = p.sensitivity.get("host", 0.0), p.sensitivity.get("estimated", 0.0)
    rnn = p.sensitivity.get("rnn_host", 0.0)
    rnn_part = f", cuDNN RNN calls' host time {100 * rnn:.0f}%" if rnn >= 0.005 else ""
    why = (f" (the step follows its host {100 * host:.0f}%, kernels no profile measured {100 * estimated:.0f}%"
           f"{rnn_part})" if p.sensitivity else "")
    lines = [f"  90% interval {low * 1e3:.2f} to {high * 1e3:.2f} ms{why}"]
    if p.host_sensitive and len(p.emulations_s) <= 1:
        lines.append("  note: the step follows its host, and one emulation's host delays can vary by 10% or more "
                     "from run to run; 'maya predict -- COMMAND' without '--repeat 1' emulates it three times and "
                     "keeps the median")
    if p.host_bound:
        lines.append("  note: a host-bound step also differs between servers of one GPU kind (measured: up to a "
                     "third between two 2 x H100 machines; docs/accuracy.md)")
    return lines


def _cmd_record(args: argparse.Namespace, command: list[str]) -> int:
    from maya.record import RecordError, RecordOptions, record

    try:
        return record(RecordOptions(out=args.out, command=command))
    except RecordError as e:
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


def _cmd_trace(args: argparse.Namespace) -> int:
    from maya.predictor.trace import TraceError, read_trace

    files: list[Path] = args.files
    is_diff = str(files[0]) == "diff"
    if (is_diff and len(files) != 3) or (not is_diff and len(files) != 1):
        print("usage: maya trace FILE | maya trace diff A B [--json] [--limit N]", file=sys.stderr)
        return 2
    if not is_diff and (args.json or args.limit != 10):
        print("maya trace: --json and --limit apply to 'maya trace diff'", file=sys.stderr)
        return 2
    try:
        if is_diff:
            return _trace_diff(files[1], files[2], args.json, args.limit)
        t = read_trace(files[0])
    except (OSError, TraceError) as e:  # the diff names the file in its TraceErrors
        where = "" if is_diff or isinstance(e, OSError) else f"{files[0]}: "
        print(f"maya trace: {where}{e}", file=sys.stderr)
        return 2
    print(json.dumps(t.header))
    print(f"{len(t)} records, {len(t.strings)} strings, {t.span_ns / 1e9:.3f} s")
    for name, n in sorted(t.kind_counts().items(), key=lambda kv: -kv[1]):
        print(f"  {name:24} {n}")
    return 0


def _trace_diff(a: Path, b: Path, as_json: bool, limit: int) -> int:
    from maya.predictor.trace.diff import diff, render

    report = diff(a, b, limit=max(limit, 0))
    if as_json:
        print(json.dumps(report, indent=1))
    else:
        for line in render(report):
            print(line)
    return 0


def _cmd_estimators(args: argparse.Namespace) -> int:
    from maya.predictor import estimate as estimators

    try:
        gpu = catalog.lookup(args.gpu).name
    except catalog.UnknownGPU as e:
        print(f"maya: {e}", file=sys.stderr)
        return 2
    if args.action == "fit":
        est = estimators.load(gpu)
        how = "read from the cache" if est.cache_hit else f"fitted in {est.fit_seconds:.1f} s"
        print(f"{gpu}: estimators of {est.source} ({how}; cache {estimators.cache_dir()})")
        for fam, info in est.summary().items():
            lent = est.borrowed.get(fam)
            print(f"  {fam:10} {info['n']:6} points  " + (f"from {lent.source}, scaled" if lent else info["choice"]))
        for fam, by_domain in est.borrowed_domains.items():
            for dom, lender in sorted(by_domain.items()):
                print(f"  {fam:10} {dom}: from {lender.source}, scaled (too few points of its own)")
        return 0
    report = estimators.evaluate(gpu)
    if args.json:
        print(json.dumps(report, indent=1))
        return 0
    for line in estimators.render(report):
        print(line)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    ours, command = _split_command(list(sys.argv[1:] if argv is None else argv))
    args = _parser().parse_args(ours)
    if args.cmd == "emulate":
        return _cmd_emulate(args, command)
    if args.cmd == "record":
        return _cmd_record(args, command)
    if args.cmd == "predict":
        return _cmd_predict(args, command)
    if command:
        print(f"maya {args.cmd}: unexpected arguments after '--'", file=sys.stderr)
        return 2
    if args.cmd == "gpus":
        return _cmd_gpus()
    if args.cmd == "summary":
        return _cmd_summary(args.dir)
    if args.cmd == "estimators":
        return _cmd_estimators(args)
    if args.cmd == "plan":
        from maya.plan.command import run_plan

        return run_plan(args.file, as_json=args.json, report=args.report)
    return _cmd_trace(args)


if __name__ == "__main__":
    sys.exit(main())
