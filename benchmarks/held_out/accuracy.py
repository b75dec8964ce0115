"""Predicted step time and peak memory of the held-out suite against the real GPUs.

    python -m benchmarks.held_out.accuracy [--only NAME,...] [--steps 6] [--work DIR]
                                           [--repeatability NAME,... [--repeat 3]]

The ground truth is the campaign's (``benchmarks/held_out/truth.py``: per
workload, GPU model and number of GPUs, the median over fresh runs of each
run's median timed step).  Each workload is emulated once here, on virtual
H100s, with the argv of its ground truth but ``--steps`` timed steps (the
warm-up as measured), DDP ones under ``torch.distributed.run`` on two emulated
GPUs of one node; the H100 and the H200 run the same sm_90 kernels, so the one
emulation is predicted for every GPU configuration measured, as ``maya
predict`` does at its default settings (the GPU's calibrated host model; a
step that follows its host by a tenth or more emulated again, into
``run0b``, and a third time, into ``run0c``, where the two disagree by more
than ``AGREE``; the median kept): that figure is the headline, one
answer per question.  ``--repeatability`` asks the question of the workloads
named ``--repeat`` times in all, the same way, and reports how far the
answers spread.

Nothing here is fitted on the suite.  Workloads whose emulation is known to
miss part of the step (``known_gap`` in ``suite.py``) are predicted and
reported like the others, and summed up apart as well; a workload that does
not emulate is listed with its error.  Saves
``benchmarks/results/held_out_accuracy.json`` and ``.md``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from statistics import median
from typing import Any

import numpy as np

if __package__ in (None, ""):  # run as a script: the repository root is what the imports need
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from benchmarks.campaigns.gpu_fidelity_campaign import cpu_model
from benchmarks.held_out.suite import FROZEN, WORKLOADS, Workload
from benchmarks.held_out.truth import DATA, ROOT, Truth, read_truth
from benchmarks.step_truth import with_steps
from maya.predict import AGREE, FurtherEmulationFailed, PredictError, predict_asked, predict_folder, rank_traces
from maya.predictor.replay.iterations import trace_steps
from maya.predictor.trace import Kind
from maya.predictor.trace.ops import device_ops, thread_names
from maya.usual_pace import UsualPace

EMULATED_GPU = "H100-SXM-80GB"  # sm_90: the H200 runs the same kernels, so its prediction uses this emulation too
RESULTS = ROOT / "benchmarks" / "results" / "held_out_accuracy"
STEPS = 6
GIB = 2**30
RANGE_SLACK = 0.001  # the caching allocator rounds a peak by up to a few MiB of its segments
WAITS = (int(Kind.STREAM_SYNC), int(Kind.DEVICE_SYNC), int(Kind.EVENT_SYNC))  # host waits, as the step finder keys them


def emulate(w: Workload, steps: int, out: Path, timeout_s: float) -> dict[str, Any]:
    """``maya emulate`` of the workload's ground-truth command for ``steps`` timed steps into ``out``
    (kept: a second call with the same folder reads it again).  Returns what the run left: exit
    code, wall time, the error's tail."""
    done = out / "emulation.json"
    if done.is_file():
        return dict(json.loads(done.read_text()))
    argv = with_steps([w.script, *w.argv], steps)
    script = [sys.executable, *argv] if w.gpus == 1 else [
        sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={w.gpus}", *argv]
    cmd = [sys.executable, "-m", "maya", "emulate", "--gpu", EMULATED_GPU, "--gpus-per-node", str(w.gpus),
           "--out", str(out), "--", *script]
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    try:
        p = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=timeout_s)
        rc, tail = p.returncode, p.stderr[-1500:]
    except subprocess.TimeoutExpired:
        rc, tail = None, f"timed out after {timeout_s:.0f} s"
    info = {"argv": argv, "exit_code": rc, "wall_s": round(time.perf_counter() - t0, 1),
            "stderr_tail": tail if rc != 0 else ""}
    summary = out / "summary.json"
    if summary.is_file():
        s = json.loads(summary.read_text())
        ranks = s.get("ranks", [])
        info.update(host_probe_ns=s.get("host_probe_ns"), unsupported_apis=s.get("unsupported_apis", []),
                    peak_allocated_bytes=max((r.get("peak_allocated_bytes") or 0 for r in ranks), default=0),
                    peak_reserved_bytes=max((r.get("peak_reserved_bytes") or 0 for r in ranks), default=0),
                    first_buckets_bytes=max((r.get("first_buckets_bytes") or 0 for r in ranks), default=0))
    done.write_text(json.dumps(info, indent=1) + "\n")
    return info


def ask(w: Workload, k: int, work: Path, steps: int,
        timeout_s: float) -> tuple[Path, dict[str, Any], Callable[[int], Path]]:
    """The k-th asking of the workload's question: its first emulation (``run<k>``), and what makes the
    further ones a host-bound step takes at ``maya predict``'s default settings (``run<k>b``, ``run<k>c``:
    :func:`maya.predict.predict_asked`; each made when first asked for, and kept)."""
    folder = work / w.name / f"run{k}"

    def further(j: int) -> Path:
        extra = work / w.name / f"run{k}{chr(ord('a') + j)}"
        if emulate(w, steps, extra, timeout_s)["exit_code"] != 0:
            raise FurtherEmulationFailed(str(extra))
        return extra
    return folder, emulate(w, steps, folder, timeout_s), further


# Steps that differ in their operations: the median step found and the script's median step (over other
# steps) may differ by this much and still be the same loop's.
STEPS_DIFFER_SLACK = 0.1


def step_check(folder: Path, steps: int) -> dict[str, Any]:
    """The steady step ``maya predict`` found in rank 0's trace (the thread it chose; its
    operations and host waits per period, or the median step's where the steps differ) beside the script's own: every workload synchronises
    the device before and after a timed step, so the loop's thread is the one of the last device
    synchronisation, and a step of the loop is what that thread issues from one synchronisation
    to the next but one.  Where the two differ, the prediction measured something other than a
    training step."""
    trace = rank_traces(folder)[0]
    found, records = trace_steps(trace)
    thread, kinds = trace.records["thread"], trace.records["kind"]
    names = thread_names(trace)
    syncs = np.flatnonzero(kinds == int(Kind.DEVICE_SYNC))
    # steps that differ in their operations: the median step's
    period = found.period or int(median(np.diff([*found.starts, found.end]).tolist()))
    out: dict[str, Any] = {"period_ops": period, "alike": found.alike,
                           "steps_thread": names.get(int(thread[records[0]]), "?")}
    if not len(syncs):
        return out
    loop = int(thread[syncs[-1]])
    mine = sorted([i for i, _ in device_ops(trace) if int(thread[i]) == loop]
                  + np.flatnonzero((thread == loop) & np.isin(kinds, WAITS)).tolist())
    at = [k for k, i in enumerate(mine) if int(kinds[i]) == int(Kind.DEVICE_SYNC)][-(2 * steps + 1):]
    cycles = [b - a for a, b in zip(at[:-2], at[2:], strict=True)]
    out.update(loop_thread=names.get(loop, "?"), script_step_ops=int(median(cycles)) if cycles else 0)
    return out


def error(predicted: float | None, measured: float | None) -> float | None:
    """Relative error, predicted / measured - 1 (None where either is missing)."""
    if predicted is None or not measured:
        return None
    return predicted / measured - 1


def case_row(w: Workload, truth: Truth, predicted_s: float | None, emulated: dict[str, Any],
             note: str = "") -> dict[str, Any]:
    """One GPU configuration of a workload: the truth, the prediction and both errors."""
    alloc = (emulated.get("peak_allocated_bytes") or None) if emulated.get("exit_code", 0) == 0 else None
    high = alloc + int(emulated.get("first_buckets_bytes") or 0) if alloc else None
    row: dict[str, Any] = {
        "workload": w.name, "family": w.family, "gpu": truth.gpu, "gpus": truth.gpus, "known_gap": w.known_gap,
        "measured_s": truth.step_s, "spread": truth.spread, "runs": len(truth.runs),
        "runs_without_result": truth.without_result, "by_machine": truth.by_machine(),
        "predicted_s": predicted_s, "error": error(predicted_s, truth.step_s),
        "measured_allocated_bytes": truth.allocated_bytes, "measured_reserved_bytes": truth.reserved_bytes,
        "emulated_allocated_bytes": alloc, "emulated_reserved_bytes": emulated.get("peak_reserved_bytes") or None,
        "memory_error": error(alloc, truth.allocated_bytes) if predicted_s is not None else None,
        "emulated_allocated_high_bytes": high,
        "runs_within_memory_range": sum(within_range(r.allocated_bytes, alloc, high) for r in truth.runs)
        if high else None,
    }
    if note:
        row["note"] = note
    return row


def within_range(measured: int, low: int, high: int) -> bool:
    """Whether a run's peak lies from the emulated peak to it plus DDP's first buckets (a real run's peak
    holds them in some runs: maya.summary.first_buckets_bytes), to within ``RANGE_SLACK``."""
    return low * (1 - RANGE_SLACK) <= measured <= high * (1 + RANGE_SLACK)


def _stats(errors: list[float]) -> dict[str, Any]:
    a = [abs(e) for e in errors]
    return {"cases": len(a), "median_abs_error": median(a) if a else None, "max_abs_error": max(a, default=None),
            "within_3pct": sum(e <= 0.03 for e in a), "within_8pct": sum(e <= 0.08 for e in a)}


def summarize(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The suite's figures: over every predicted case, over those without a known gap, by GPU
    configuration, and the DDP workloads' peak memory; the cases left unpredicted, named."""
    predicted = [r for r in rows if r["error"] is not None]
    clean = [r for r in predicted if not r["known_gap"]]
    configs = sorted({(r["gpu"], r["gpus"]) for r in rows})
    ddp_mem = [r["memory_error"] for r in predicted if r["gpus"] > 1 and r["memory_error"] is not None]
    mem = [r["memory_error"] for r in predicted if r["memory_error"] is not None]
    ddp_rows = [r for r in predicted if r["gpus"] > 1 and r.get("runs_within_memory_range") is not None]
    return {
        "all": _stats([r["error"] for r in predicted]),
        "without_known_gap": _stats([r["error"] for r in clean]),
        "known_gap": sorted({r["workload"] for r in rows if r["known_gap"]}),
        "not_predicted": sorted({f"{r['workload']} ({r['gpu']} x{r['gpus']})" for r in rows if r["error"] is None}),
        "by_config": {f"{g} x{n}": _stats([r["error"] for r in predicted if (r["gpu"], r["gpus"]) == (g, n)])
                      for g, n in configs},
        "ddp_peak_memory": {"cases": len(ddp_mem), "median_abs_error": median(abs(e) for e in ddp_mem) if ddp_mem
                            else None, "max_abs_error": max((abs(e) for e in ddp_mem), default=None),
                            "runs": sum(r["runs"] for r in ddp_rows),
                            "runs_within_range": sum(r["runs_within_memory_range"] for r in ddp_rows)},
        "interval": {"cases": sum("within_interval" in r for r in predicted),
                     "within": sum(bool(r.get("within_interval")) for r in predicted),
                     "within_without_known_gap": sum(bool(r.get("within_interval")) for r in clean),
                     "cases_without_known_gap": sum("within_interval" in r for r in clean)},
        "peak_memory": {"cases": len(mem), "median_abs_error": median(abs(e) for e in mem) if mem else None,
                        "max_abs_error": max((abs(e) for e in mem), default=None)},
    }


def repeat_spread(predicted: list[float]) -> float:
    """(max - min) / median of the predictions of one question."""
    return (max(predicted) - min(predicted)) / median(predicted)


def predict_all(w: Workload, truths: list[Truth], folder: Path, emulated: dict[str, Any],
                steps: int, further: Callable[[int], Path] | None = None,
                usual: UsualPace | None = None) -> list[dict[str, Any]]:
    """Every measured configuration of the workload, predicted from the emulation in ``folder`` as
    ``maya predict`` does at its default settings: where the step follows its host, with ``further``'s
    emulations too (:func:`maya.predict.predict_asked`, with the machine's ``usual`` pace), the median kept."""
    rows = []
    for t in truths:
        if emulated["exit_code"] != 0:
            why = "; ".join(emulated.get("unsupported_apis") or []) or emulated["stderr_tail"].strip()[-300:]
            rows.append(case_row(w, t, None, emulated, f"emulation failed (exit code {emulated['exit_code']}): {why}"))
            continue
        try:
            p = predict_folder(folder, t.gpu, gpus_per_node=w.gpus)
            if further is not None:
                try:
                    p = predict_asked(folder, t.gpu, further, gpus_per_node=w.gpus, known=p, usual=usual)
                except FurtherEmulationFailed:  # the first emulation's answer stands
                    pass
        except PredictError as e:
            rows.append(case_row(w, t, None, emulated, f"maya predict: {e}"))
            continue
        check = step_check(folder, steps)
        note = ""
        if "loop_thread" in check and check["steps_thread"] != check["loop_thread"]:
            note = (f"steady step found in thread {check['steps_thread']}, not the loop's ({check['loop_thread']}): "
                    f"{check['period_ops']} operations; the script's step: {check['script_step_ops']}")
        elif check.get("script_step_ops") not in (None, check["period_ops"]) and (
                check["alike"] or abs(check["period_ops"] / max(check["script_step_ops"], 1) - 1) > STEPS_DIFFER_SLACK):
            note = f"steady step found: {check['period_ops']} operations; the script's step: {check['script_step_ops']}"
        row = case_row(w, t, p.step_time_s, emulated, note)
        low, high = p.interval_s
        row.update(steps_s=list(p.steps_s), emulations_s=list(p.emulations_s or (p.step_time_s,)),
                   slow_phase_s=list(p.slow_phase_s), pace_over_usual=p.pace_over_usual,
                   breakdown=p.breakdown, confidence=p.confidence,
                   approximated=p.approximated, interval_s=[low, high], within_interval=low <= t.step_s <= high,
                   **check)
        rows.append(row)
    return rows


def report(r: dict[str, Any], emulated: dict[str, Any]) -> None:
    """One predicted configuration's line of the run's log."""
    print(f"{r['workload']:20} {r['gpu']:15} x{r['gpus']}  measured {_ms(r['measured_s']):>7} ms "
          f"({r['runs']} runs, spread {100 * r['spread']:4.1f}%)  predicted {_ms(r['predicted_s']):>7} ms "
          f"{_pct(r['error']):>7}  memory {_pct(r['memory_error']):>7}  (emulated in {emulated['wall_s']} s)"
          + (f"  {r['note'][:160]}" if r.get("note") else ""), flush=True)


def questions(w: Workload, truths: list[Truth], work: Path, steps: int, timeout_s: float, repeat: int,
              emulations: dict[str, Any], key: str,
              usual: UsualPace | None = None) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The workload's configurations on ``w.gpus`` GPUs, asked as ``maya predict`` asks (emulations
    under ``work``, the first one's summary kept as ``emulations[key]``), and where ``repeat`` > 1
    asked that many times in all: (rows, repeatability).  A DDP workload measured on another number
    of GPUs too comes here as a copy of itself with that many ranks (the same script, each rank's
    batch unchanged)."""
    folder, emulated, further = ask(w, 0, work, steps, timeout_s)
    emulations[key] = emulated
    got = predict_all(w, truths, folder, emulated, steps, further, usual)
    for r in got:
        report(r, emulated)
    repeatability: list[dict[str, Any]] = []
    if repeat < 2 or emulated["exit_code"] != 0:
        return got, repeatability
    asked = [ask(w, k, work, steps, timeout_s) for k in range(1, repeat)]
    for t in truths:
        answers = [next(r for r in got if (r["gpu"], r["gpus"]) == (t.gpu, t.gpus)),
                   *(r for f, e, m in asked for r in predict_all(w, [t], f, e, steps, m, usual))]
        preds = [r["predicted_s"] for r in answers]
        ok = [p for p in preds if p is not None]
        repeatability.append({"workload": w.name, "gpu": t.gpu, "gpus": t.gpus, "predicted_s": preds,
                              "emulations": [len(r.get("emulations_s") or ()) for r in answers],
                              "pace_over_usual": [r.get("pace_over_usual") for r in answers],
                              "spread": repeat_spread(ok) if len(ok) > 1 else None,
                              "errors": [error(p, t.step_s) for p in preds]})
        print(f"{w.name:20} {t.gpu:15} x{t.gpus}  asked {len(preds)} times: "
              f"{', '.join(_ms(p) for p in preds)} ms, spread {_abs_pct(repeatability[-1]['spread'])}", flush=True)
    return got, repeatability


def _commit() -> str:
    def git(*args: str) -> str:
        return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True).stdout.strip()
    head = git("rev-parse", "HEAD")
    return head + (" (with uncommitted changes)" if git("status", "--porcelain", "--untracked-files=no") else "")


def _of(row: dict[str, Any]) -> str:
    """How many emulations a prediction is the median of, where more than one."""
    n = len(row.get("emulations_s") or ())
    return f" (median of {n})" if n > 1 else ""


def _ms(x: float | None) -> str:
    return "-" if x is None else f"{1e3 * x:.2f}"


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:+.1f}%"


def _abs_pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.1f}%"


def _by_machine(row: dict[str, Any]) -> str:
    """Where several machines measured a configuration, each one's median step, runs and the
    prediction's error against it (machines of one kind differ: the pooled median hides it)."""
    machines, p = row.get("by_machine") or {}, row["predicted_s"]
    if len(machines) < 2:
        return ""
    return "; by machine " + ", ".join(
        f"{_ms(m['step_s'])} ({m['runs']}{'' if p is None else ', ' + _pct(p / m['step_s'] - 1)})"
        for m in machines.values())


def markdown(doc: dict[str, Any]) -> str:
    s = doc["summary"]
    lines = [f"# Held-out suite: accuracy of `maya predict` ({doc['date']})", "",
             f"Command: `{doc['command']}`  ", f"Commit: {doc['commit']}  ",
             f"Emulating machine: {doc['machine']['cpu']}, {doc['machine']['cpus']} CPUs, load average "
             f"{doc['machine']['load_before']} before, {doc['machine']['load_after']} after  ",
             f"Ground truth: `{doc['truth']}` (suite frozen {doc['frozen']}); each workload emulated on "
             f"{doc['emulated_gpu']}, {doc['steps']} timed steps, and predicted for every configuration measured "
             "as `maya predict` does at its default settings: from one emulation, and where that one's step "
             f"follows its host by a tenth or more, from two that agree within {AGREE:.0%} or else three, their "
             "median (\"median of 2\", \"median of 3\").", "",
             "Never fitted on: these figures are apart from the calibration cases' "
             "(`benchmarks/results/step_accuracy.json`).", "",
             "| cases | predicted | median abs error | max abs error | within 3% | within 8% |",
             "|---|---|---|---|---|---|"]
    for label, key in (("all", "all"), ("without known gaps", "without_known_gap")):
        st = s[key]
        lines.append(f"| {label} | {st['cases']} | {_abs_pct(st['median_abs_error'])} | "
                     f"{_abs_pct(st['max_abs_error'])} | {st['within_3pct']} | {st['within_8pct']} |")
    for cfg, st in s["by_config"].items():
        lines.append(f"| {cfg} | {st['cases']} | {_abs_pct(st['median_abs_error'])} | "
                     f"{_abs_pct(st['max_abs_error'])} | {st['within_3pct']} | {st['within_8pct']} |")
    dm = s["ddp_peak_memory"]
    lines += ["", f"DDP peak memory (emulated `max_memory_allocated` against measured, {dm['cases']} cases): "
              f"median {_abs_pct(dm['median_abs_error'])}, max {_abs_pct(dm['max_abs_error'])}; all workloads: "
              f"median {_abs_pct(s['peak_memory']['median_abs_error'])}, "
              f"max {_abs_pct(s['peak_memory']['max_abs_error'])}."
              + (f" A DDP run's peak holds DDP's first gradient buckets in some runs and not in others: "
                 f"{dm['runs_within_range']} of {dm['runs']} DDP runs peaked from the emulated peak to it plus the "
                 f"first buckets (`peak_memory_high_bytes`, within {RANGE_SLACK:.1%})." if dm.get("runs") else ""),
              "",
              f"Not predicted: {', '.join(s['not_predicted']) or 'none'}.", "",
              f"90% interval of `maya predict` (`step_time_low_s` to `step_time_high_s`): the measured time falls "
              f"inside it in {s['interval']['within']} of {s['interval']['cases']} cases "
              f"({s['interval']['within_without_known_gap']} of {s['interval']['cases_without_known_gap']} "
              "without known gaps).", "",
              "| workload | GPU | GPUs | measured ms (runs, spread) | predicted ms | error | peak allocated GiB, "
              "measured / emulated | memory error | note |", "|---|---|---|---|---|---|---|---|---|"]
    rows = doc["cases"]
    for part in ([r for r in rows if not r["known_gap"]], [r for r in rows if r["known_gap"]]):
        for r in part:
            emu = r["emulated_allocated_bytes"]
            note = r.get("note", "") or (f"known gap: {r['known_gap']}" if r["known_gap"] else "")
            if r["runs_without_result"]:
                note = f"{r['runs_without_result']} run(s) left no result line. {note}".strip()
            lines.append(f"| {r['workload']} | {r['gpu']} | {r['gpus']} | {_ms(r['measured_s'])} ({r['runs']}, "
                         f"{100 * r['spread']:.1f}%{_by_machine(r)}) | {_ms(r['predicted_s'])}{_of(r)} | {_pct(r['error'])} | "
                         f"{r['measured_allocated_bytes'] / GIB:.2f} / {'-' if not emu else f'{emu / GIB:.2f}'} | "
                         f"{_pct(r['memory_error'])} | {note.replace('|', '/')} |")
    rep = doc.get("repeatability") or []
    if rep:
        st = s["repeatability"]
        lines += ["", f"Repeatability: the same question asked {doc['repeat']} times, each as `maya predict` asks it "
                  "(one emulation; two or three where the step follows its host by a tenth or more); spread = (max - min) / "
                  f"median of the predicted step times: median {_abs_pct(st['median_spread'])}, max "
                  f"{_abs_pct(st['max_spread'])}, {st['within_3pct']} of {st['questions']} within 3%."
                  + (" Emulations per answer: " + ", ".join(f"{n}: {k} answers" for n, k in per.items()) + "."
                     if (per := st.get("emulations_per_answer")) else ""),
                  "", "| workload | GPU | GPUs | predicted ms | spread |", "|---|---|---|---|---|"]
        for r in rep:
            lines.append(f"| {r['workload']} | {r['gpu']} | {r['gpus']} | "
                         f"{', '.join(_ms(x) for x in r['predicted_s'])} | {_abs_pct(r['spread'])} |")
    return "\n".join(lines) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", default="", help="workload names, comma-separated (results then not saved)")
    ap.add_argument("--steps", type=int, default=STEPS, help="timed steps emulated (default %(default)s)")
    ap.add_argument("--work", type=Path, default=None, help="emulations kept here (reused when present)")
    ap.add_argument("--repeatability", default="",
                    help="workloads to emulate --repeat times, comma-separated, or 'all'")
    ap.add_argument("--repeat", type=int, default=3,
                    help="times each --repeatability workload's question is asked (default 3)")
    ap.add_argument("--timeout-s", type=float, default=1800, help="per emulation (default %(default)s)")
    a = ap.parse_args()
    names = {w.name for w in WORKLOADS}
    wanted = set(filter(None, a.only.split(",")))
    again = names if a.repeatability == "all" else set(filter(None, a.repeatability.split(",")))
    unknown = (wanted | again) - names
    if unknown:
        ap.error(f"not in the suite: {', '.join(sorted(unknown))} "
                 f"(benchmarks/held_out/suite.py: {', '.join(sorted(names))})")
    if a.steps < 3:
        ap.error("--steps must be at least 3: the steady-step finder needs repeating steps")
    work = a.work or Path(tempfile.mkdtemp(prefix="maya-held-out-"))
    usual = UsualPace(work / "usual_pace.json")  # this machine's readings, as maya predict keeps them
    truth = read_truth(DATA, names)
    load_before = [round(x, 2) for x in os.getloadavg()]
    rows: list[dict[str, Any]] = []
    repeatability: list[dict[str, Any]] = []
    emulations: dict[str, Any] = {}
    for w in WORKLOADS:
        if wanted and w.name not in wanted:
            continue
        truths = [t for (n, _, _), t in truth.items() if n == w.name]
        if not truths:
            print(f"{w.name}: no ground truth in {DATA}", flush=True)
            continue
        for gpus in sorted({t.gpus for t in truths}, key=lambda g: (g != w.gpus, g)):  # the suite's own first
            own = gpus == w.gpus  # the suite's emulations keep their folders and names
            got, rep = questions(replace(w, gpus=gpus), [t for t in truths if t.gpus == gpus],
                                 work if own else work / f"x{gpus}", a.steps, a.timeout_s,
                                 a.repeat if w.name in again else 1, emulations,
                                 w.name if own else f"{w.name} x{gpus}", usual)
            rows += got
            repeatability += rep
    summary = summarize(rows)
    spreads = [r["spread"] for r in repeatability if r["spread"] is not None]
    used = [n for r in repeatability for n in r["emulations"]]
    summary["repeatability"] = {"questions": len(spreads), "emulations": a.repeat,
                                "emulations_per_answer": {str(n): used.count(n) for n in sorted(set(used))},
                                "median_spread": median(spreads) if spreads else None,
                                "max_spread": max(spreads, default=None),
                                "within_3pct": sum(x <= 0.03 for x in spreads)}
    print(json.dumps({k: summary[k] for k in ("all", "without_known_gap", "ddp_peak_memory")}))
    if wanted:
        return 0
    doc = {"date": time.strftime("%Y-%m-%d"), "command": " ".join(["python -m benchmarks.held_out.accuracy",
                                                                    *sys.argv[1:]]),
           "commit": _commit(), "frozen": FROZEN, "truth": str(DATA.relative_to(ROOT)), "emulated_gpu": EMULATED_GPU,
           "steps": a.steps, "repeat": a.repeat,
           "machine": {"cpu": cpu_model(), "cpus": os.cpu_count(), "load_before": load_before,
                       "load_after": [round(x, 2) for x in os.getloadavg()]},
           "summary": summary, "cases": rows, "repeatability": repeatability, "emulations": emulations}
    RESULTS.with_suffix(".json").write_text(json.dumps(doc, indent=1) + "\n")
    RESULTS.with_suffix(".md").write_text(markdown(doc))
    print(f"saved {RESULTS.with_suffix('.json')} and .md")
    return 0


if __name__ == "__main__":
    sys.exit(main())
