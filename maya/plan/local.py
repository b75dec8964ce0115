"""``maya plan`` on this machine: each emulation a local ``maya emulate`` subprocess, results cached.

The operator drives the same :class:`maya.plan.search.Search` with emulation
Jobs instead; everything after the emulation (prediction, choice, status) is
shared.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from maya.emulate import find_library
from maya.plan.cache import Cache, emulation_key
from maya.plan.candidates import is_python
from maya.plan.choose import Choice, Row, choose
from maya.plan.evaluate import predict_gpus, run_result
from maya.plan.search import Request, Search, skipped_outcomes
from maya.plan.spec import Plan
from maya.plan.status import status
from maya.usual_pace import UsualPace


@dataclass
class PlanRun:
    plan: Plan
    search: Search
    choice: Choice
    keys: dict[tuple[Any, str, int], str]  # (program, emulated GPU, run) -> cache key
    cache: Cache
    seconds: float

    def status(self, limit: int | None = None) -> dict[str, Any]:
        return status(self.choice, searched=len(self.search.candidates) + len(self.search.skipped),
                      emulations={**self.search.emulations, "needed": self.search.needed()},
                      search=self.search.method, limit=limit)

    def source_of(self, row: Row) -> Path | None:
        """The emulation behind a candidate's prediction (of several runs of its program, the median's)."""
        program = self.search.program[row.candidate]
        for (p, _gpu, _run), key in self.keys.items():
            pred = self.cache.prediction(key, row.candidate.gpu) if p == program else None
            if pred and row.step_s is not None and pred.get("stepTimeSeconds") == row.step_s:
                return self.cache.folder(key)
        return None


Progress = Callable[[str], None]


def _local_argv(argv: list[str]) -> list[str]:
    """A bare ``python`` means the interpreter Maya runs in (the one with the user's torch)."""
    if argv and argv[0] in ("python", "python3") and is_python(argv[0]):
        return [sys.executable, *argv[1:]]
    return argv


def emulate_request(plan: Plan, req: Request, cwd: Path, cache: Cache, key: str) -> dict[str, Any]:
    """Run one emulation into the cache and return how it ended (:func:`maya.plan.evaluate.run_result`)."""
    folder = cache.folder(key)
    cache.discard(key)
    folder.mkdir(parents=True)
    command = _local_argv(req.program.emulation_command())
    if plan.emulation.get("steps"):
        command += ["--steps", str(plan.emulation["steps"])]
    per_node = req.program.gpus_per_node
    maya_cmd = [sys.executable, "-m", "maya", "emulate", "--gpu", req.gpu, "--gpus", str(per_node),
                "--gpus-per-node", str(per_node), "--out", str(folder), "--", *command]
    env = {**os.environ, **plan.env}
    with open(folder / "log.txt", "w") as log:
        code = subprocess.run(maya_cmd, cwd=cwd, env=env, stdout=log, stderr=subprocess.STDOUT,
                              stdin=subprocess.DEVNULL, check=False).returncode
    tail = (folder / "log.txt").read_text(errors="replace")[-20000:]
    return run_result(folder, code, tail)


def plan_locally(plan: Plan, cwd: Path, *, cache: Cache | None = None, progress: Progress | None = None) -> PlanRun:
    """Search, emulating what the cache lacks, and choose."""
    cache = cache or Cache()
    say = progress or (lambda _msg: None)
    started = time.monotonic()
    search = Search(plan, usual=UsualPace.of)
    library = find_library()
    keys: dict[tuple[Any, str, int], str] = {}
    say(f"{len(search.candidates)} candidates ({len(search.skipped)} skipped); search: {search.method}")
    count = 0
    while not search.finished():
        requests = search.next(1)
        if not requests:
            break
        for req in requests:
            count += 1
            run = {"run": str(req.run)} if req.run else {}  # a further run of a host-sensitive program
            key = emulation_key(req.program.emulation_command(), req.program.gpus_per_node, req.program.nodes,
                                req.gpu, cwd, dict(plan.env) | {"steps": str(plan.emulation.get("steps", ""))} | run,
                                library)
            keys[(req.program, req.gpu, req.run)] = key
            what = f"{req.program.ranks} rank(s) on {req.gpu}: {' '.join(req.program.argv[1:])}"
            if req.run:
                what += f" (again, run {req.run + 1}: its step follows its host, so the median counts)"
            result = cache.result(key)
            reused = result is not None
            if result is None:
                say(f"[{count}] emulating {what}")
                t0 = time.monotonic()
                result = emulate_request(plan, req, cwd, cache, key)
                cache.store_result(key, result)
                say(f"      {result['status']} in {time.monotonic() - t0:.0f} s")
            else:
                say(f"[{count}] reusing the emulation of {what}: {result['status']}")
            predictions: dict[str, dict[str, Any]] = {}
            if result["status"] == "ok":
                for gpu in req.predict_for:
                    cached = cache.prediction(key, gpu)
                    if cached is None:
                        cached = predict_gpus(cache.folder(key), [gpu], req.program.gpus_per_node)[gpu]
                        cache.store_prediction(key, gpu, cached)
                    predictions[gpu] = cached
            search.record(req, result, predictions, key=key, reused=reused)
    choice = choose(plan, search.outcomes() + skipped_outcomes(search.skipped))
    return PlanRun(plan, search, choice, keys, cache, time.monotonic() - started)
