"""``maya plan FILE [--json] [--report DIR]``: read, search, choose, print; exit 2 with one clear message."""

from __future__ import annotations

import json
from pathlib import Path

from rich.console import Console

from maya.emulate import EmulateError
from maya.plan.local import PlanRun, plan_locally
from maya.plan.report import print_report, write_html
from maya.plan.spec import PlanError, load


def run_plan(file: Path, *, as_json: bool = False, report: Path | None = None) -> int:
    err = Console(stderr=True, highlight=False, soft_wrap=True)
    try:
        plan = load(file)
        cwd = Path(plan.working_dir) if plan.working_dir else file.resolve().parent
        if not cwd.is_dir():
            raise PlanError(f"spec.workingDir: {cwd} is not a folder")
        run = plan_locally(plan, cwd, progress=lambda msg: err.print(f"maya plan: {msg}"))
    except (PlanError, EmulateError) as e:
        err.print(f"maya plan: {e}", markup=False)
        return 2
    status = run.status()
    if report is not None:
        _write_report(run, status, report, err)
    if as_json:
        print(json.dumps(status, indent=1))
    else:
        print_report(status, plan.deadline.steps if plan.deadline else None)
    err.print(f"maya plan: planned in {run.seconds:.0f} s", markup=False)
    if run.choice.recommendation is None:
        assert run.choice.problem is not None
        err.print(f"maya plan: {run.choice.problem[1]}", markup=False)
        return 2
    return 0


def _write_report(run: PlanRun, status: dict[str, object], folder: Path, err: Console) -> None:
    from maya.predict import PredictError, predict_folder

    folder.mkdir(parents=True, exist_ok=True)
    timeline = None
    rec = run.choice.recommendation
    if rec is not None:
        program = run.search.program[rec.candidate]
        source = run.source_of(rec)
        if source is not None:
            try:
                predict_folder(source, rec.candidate.gpu, gpus_per_node=program.gpus_per_node,
                               timeline=folder / "timeline.json")
                timeline = "timeline.json"
            except PredictError as e:
                err.print(f"maya plan: no timeline: {e}", markup=False)
    write_html(folder / "report.html", run.plan.name, dict(status), timeline)
    (folder / "status.json").write_text(json.dumps(status, indent=1) + "\n")
    err.print(f"maya plan: report in {folder / 'report.html'}", markup=False)
