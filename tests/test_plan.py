"""maya plan without emulation: the schema (good and bad files), candidates and their commands, the search's
emulation requests and pruning, memory verdicts, the choice under each objective and deadline, ties, the status
JSON, and the CRD generated from the same schema."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from maya.plan.candidates import enumerate_candidates, launch_command, program_of, with_argument
from maya.plan.choose import choose
from maya.plan.evaluate import memory_verdict
from maya.plan.schema import CANDIDATE_SCHEMA
from maya.plan.search import Request, Search, skipped_outcomes
from maya.plan.spec import PlanError, load, parse, parse_duration
from maya.plan.status import status

ROOT = Path(__file__).resolve().parents[1]
GIB = 2**30
H100, H200 = "H100-SXM-80GB", "H200-SXM-141GB"


def doc(**spec: Any) -> dict[str, Any]:
    d = yaml.safe_load((ROOT / "examples" / "plan.yaml").read_text())
    d["spec"].update(spec)
    return d


def test_the_example_plans_parse():
    plan = load(ROOT / "examples" / "plan.yaml")
    assert plan.name == "llm-demo" and plan.global_batch == 64 and plan.micro_batches == (16, 32, 64)
    assert [s.gpus for s in plan.shapes] == [1, 1, 2]
    assert plan.prices == {H100: 3.0, H200: 4.0}
    assert plan.deadline is not None and plan.deadline.seconds == 7200
    assert load(ROOT / "examples" / "plan-1b.yaml").knobs[0].flag == "--ckpt"


@pytest.mark.parametrize("change, message", [
    ({"objective": "fastest"}, "spec.objective: 'fastest' is not one of ['cost', 'time']"),
    ({"batch": {"global": 64, "microBatches": [16]}}, "spec.batch.microBatchArg: missing"),
    ({"batchSize": 3}, "spec.batchSize: unknown field"),
    ({"resources": [{"gpu": "H900"}]}, "spec.resources: unknown GPU 'H900'; valid names: H100-SXM-80GB"),
    ({"resources": [{"gpu": H100, "gpusPerNode": 0}]}, "spec.resources[0].gpusPerNode: 0 is less than the minimum"),
    ({"batch": {"global": 30, "microBatchArg": "--batch", "microBatches": [16, 32]}},
     "spec.batch.global: 30 is divisible by none of spec.batch.microBatches [16, 32]"),
    ({"deadline": {"steps": 10, "duration": "soon"}}, "spec.deadline.duration: 'soon' is not a duration"),
    ({"knobs": [{"name": "x", "flag": "--x", "arg": "--y", "values": [1]}]}, "spec.knobs[0]: give either 'flag'"),
    ({"prices": {"Z100": 1.0}}, "spec.prices.Z100: unknown GPU"),
    ({"knobs": [{"name": "microBatch", "flag": "--m"}]}, "spec.knobs[0].name: 'microBatch' is reserved"),
])
def test_a_malformed_plan_names_the_field(change, message):
    with pytest.raises(PlanError) as e:
        parse(doc(**change))
    assert message in str(e.value)


def test_a_missing_spec_and_bad_yaml_are_named(tmp_path):
    bad = {"apiVersion": "maya.dev/v1alpha1", "kind": "TrainingPlan", "metadata": {"name": "x"}}
    with pytest.raises(PlanError, match="spec: missing"):
        parse(bad)
    f = tmp_path / "p.yaml"
    f.write_text("spec: [unclosed\n")
    with pytest.raises(PlanError, match="not valid YAML at line"):
        load(f)
    with pytest.raises(PlanError, match="cannot read"):
        load(tmp_path / "none.yaml")


def test_a_grid_of_resources_and_durations():
    plan = parse(doc(resources={"gpus": [H100, "h200-sxm-141gb"], "gpusPerNode": [1, 2], "nodes": [1]}))
    assert [(s.gpu, s.gpus_per_node) for s in plan.shapes] == [(H100, 1), (H100, 2), (H200, 1), (H200, 2)]
    assert parse_duration("1h30m") == 5400 and parse_duration("1d") == 86400 and parse_duration("90s") == 90


def test_candidates_skip_what_does_not_divide_and_what_is_excluded():
    plan = parse(doc(exclude=[{"gpu": H100, "activationCheckpointing": True}]))
    kept, skipped = enumerate_candidates(plan)
    reasons = [s.reason for s in skipped]
    assert sum("does not divide the global batch 64" in r for r in reasons) == 2  # 64 x 2 ranks, ckpt off and on
    assert sum(r.startswith("excluded by spec.exclude") for r in reasons) == 3  # H100 x ckpt on x 3 micro-batches
    assert len(kept) + len(skipped) == 3 * 3 * 2
    c = next(c for c in kept if c.shape.gpus == 2 and c.micro_batch == 16)
    assert c.accumulation == 2


def test_the_command_of_a_candidate():
    plan = parse(doc())
    kept, _ = enumerate_candidates(plan)
    c = next(c for c in kept if c.shape.gpus == 2 and c.micro_batch == 16 and dict(c.knobs)["activationCheckpointing"])
    p = program_of(plan, c)
    assert p.argv[-5:] == ("--batch", "16", "--accum", "2", "--ckpt")
    assert p.emulation_command()[:5] == ["python", "-m", "torch.distributed.run", "--nproc-per-node=2", "--nnodes=1"]
    assert p.job_command()[3:5] == ["--nproc-per-node=2", "--nnodes=1"]
    assert with_argument(["t.py", "--batch=8", "--x"], "--batch", "4") == ["t.py", "--x", "--batch", "4"]
    with pytest.raises(PlanError, match="not a Python interpreter"):
        launch_command(["bash", "run.sh"], 2, 1)
    assert launch_command(["/usr/bin/python3.11", "t.py"], 4, 2)[:3] == ["/usr/bin/python3.11", "-m",
                                                                          "torch.distributed.run"]


def ok(peak_gib: float, allocated_gib: float | None = None) -> dict[str, Any]:
    return {"status": "ok", "exitCode": 0, "peakReservedBytes": int(peak_gib * GIB),
            "peakAllocatedBytes": int((allocated_gib or peak_gib) * GIB)}


def oom(allocated_gib: float) -> dict[str, Any]:
    return {"status": "oom", "exitCode": 1, "peakReservedBytes": int(allocated_gib * GIB),
            "peakAllocatedBytes": int(allocated_gib * GIB), "shortByBytes": GIB, "requestBytes": GIB}


def pred(step: float, peak_gib: float = 10.0) -> dict[str, Any]:
    return {"stepTimeSeconds": step, "stepTimeSecondsLow": step * 0.97, "stepTimeSecondsHigh": step * 1.03,
            "peakMemoryBytes": int(peak_gib * GIB)}


def test_memory_verdicts_of_a_larger_gpus_emulation():
    assert memory_verdict(ok(40), H100) == "fits"
    assert memory_verdict(ok(76, 70), H100) == "near"  # above 90% of 79 GiB: only an emulation on it can tell
    assert memory_verdict(ok(100, 90), H100) == "oom"
    assert memory_verdict(oom(120), H200) == "oom"


def drive(search: Search, results: dict[tuple[int, int, bool], dict[str, Any]], steps: dict[int, float],
          host: float = 0.0) -> int:
    """Answer every request from a table (micro-batch, ranks, ckpt) -> result, each step following its host by
    ``host``; returns emulations run."""
    n = 0
    while not search.finished():
        for req in search.next(4):
            c = next(c for c in search.candidates if search.program[c] == req.program)
            r = results[(c.micro_batch, c.shape.gpus, bool(dict(c.knobs).get("activationCheckpointing")))]
            if req.gpu == H100 and r["status"] == "ok" and memory_verdict(r, H100) == "near":
                r = oom(82)  # emulated on the H100 itself: it does not fit
            preds = {g: {**pred(steps[c.micro_batch] / c.shape.gpus * (0.9 if g == H200 else 1.0)),
                         "hostSensitivity": host} for g in req.predict_for} if r["status"] == "ok" else {}
            search.record(req, r, preds, key=f"k{n}")
            n += 1
    return n


RESULTS = {(16, 1, False): ok(30), (16, 1, True): ok(20), (32, 1, False): ok(76, 72), (32, 1, True): ok(35),
           (64, 1, False): oom(140), (64, 1, True): ok(60), (16, 2, False): ok(30), (16, 2, True): ok(20),
           (32, 2, False): ok(50), (32, 2, True): ok(35)}
STEPS = {16: 0.30, 32: 0.28, 64: 0.27}


def test_one_emulation_per_program_serves_both_gpus_and_oom_prunes_larger_micro_batches():
    plan = parse(doc())
    search = Search(plan)
    runs = drive(search, RESULTS, STEPS)
    outcomes = dict(search.outcomes())
    by = {(c.gpu, c.shape.gpus, c.micro_batch, dict(c.knobs)["activationCheckpointing"]): o
          for c, o in outcomes.items()}
    # 6 one-rank programs + 4 two-rank ones, each emulated once on the H200, plus one re-emulation of a
    # program whose peak came near the H100's capacity.
    assert runs == 11 and search.emulations == {"ran": 11, "failed": 0, "reused": 0}
    assert by[(H100, 1, 32, False)].status == "oom"  # emulated on the H100 itself
    assert by[(H200, 1, 32, False)].status == "ok"
    assert by[(H200, 1, 64, False)].status == "oom" and by[(H100, 1, 64, False)].status == "oom"
    assert by[(H100, 1, 16, False)].prediction["stepTimeSeconds"] == pytest.approx(0.30)
    assert by[(H200, 1, 16, False)].prediction["stepTimeSeconds"] == pytest.approx(0.27)


def host_bound_drive(search: Search, host: float, steps: dict[int, float], fail: int | None = None) -> list[Request]:
    """Answers every request with micro-batch 16's step ``steps[run]`` (following its host by ``host``); run ``fail``
    fails.  Returns the requests in the order asked."""
    asked = []
    while not search.finished():
        for req in search.next(4):
            asked.append(req)
            if req.run == fail:
                search.record(req, {"status": "failed", "exitCode": 1, "error": "killed"}, {})
                continue
            preds = {g: {**pred(steps[req.run]), "hostSensitivity": host} for g in req.predict_for}
            search.record(req, ok(30), preds, key=f"k{req.run}")
    return asked


ONE_PROGRAM = {"batch": {"global": 16, "microBatchArg": "--batch", "microBatches": [16]},
               "resources": [{"gpu": H100}], "knobs": []}


def test_a_host_bound_program_is_emulated_three_times_and_judged_on_the_median():
    search = Search(parse(doc(**ONE_PROGRAM)))
    asked = host_bound_drive(search, 0.3, {0: 0.40, 1: 0.30, 2: 0.34})
    assert [r.run for r in asked] == [0, 1, 2] and {r.gpu for r in asked} == {H100}
    assert search.emulations == {"ran": 3, "failed": 0, "reused": 0} and search.needed() == search.completed() == 3
    [(_, o)] = search.outcomes()
    p = o.prediction
    assert p["stepTimeSeconds"] == 0.34 and p["emulationsStepTimeSeconds"] == [0.30, 0.34, 0.40]
    # The interval takes their spread (+-0.05 s) in place of one emulation's noise: wider than one run's +-3%.
    assert p["stepTimeSecondsLow"] < 0.34 - 0.05 and p["stepTimeSecondsHigh"] > 0.34 + 0.05
    row = choose(search.plan, search.outcomes()).recommendation
    assert row is not None and row.step_s == 0.34


@pytest.mark.parametrize("host, repeats, second, runs", [
    (0.05, None, 0.30, 1), (0.3, 1, 0.30, 1), (0.05, 2, 0.30, 2), (0.9, None, 0.30, 3),
    (0.9, None, 0.403, 2),  # the second agrees with the first within 1%: the median of a third lies between them
    (0.9, 3, 0.403, 3),  # the plan asks for three: three
])
def test_how_many_emulations_a_program_gets(host, repeats, second, runs):
    emulation = {"repeats": repeats} if repeats else {}
    search = Search(parse(doc(**ONE_PROGRAM, emulation=emulation)))
    asked = host_bound_drive(search, host, {0: 0.40, 1: second, 2: 0.34})
    assert [r.run for r in asked] == list(range(runs))
    steps = sorted([0.40, second, 0.34][:runs])
    assert search.outcomes()[0][1].prediction["stepTimeSeconds"] == steps[(runs - 1) // 2]


def test_a_further_run_that_fails_leaves_the_median_of_the_others():
    search = Search(parse(doc(**ONE_PROGRAM)))
    host_bound_drive(search, 0.3, {0: 0.40, 1: 0.30}, fail=2)
    assert search.emulations == {"ran": 3, "failed": 1, "reused": 0} and not search.stopped
    [(_, o)] = search.outcomes()
    assert o.status == "ok" and o.prediction["emulationsStepTimeSeconds"] == [0.30, 0.40]
    assert o.prediction["stepTimeSeconds"] == 0.30  # the lower middle of an even count, as maya predict keeps


def cpu_drive(search: Search, steps: dict[int, float], pace: dict[int, int], *, probe: dict[int, float] | None = None,
              node: dict[int, str] | None = None) -> list[int]:
    """Answers a host-bound program's runs with step ``steps[run]``, the yardstick's steady reading ``pace[run]``
    (ns), its probe and its node ("n1" unless given).  Returns the runs asked, in order."""
    asked = []
    while not search.finished():
        for req in search.next(4):
            asked.append(req.run)
            readings = {"hostSensitivity": 0.3, "steadyPaceNs": [pace[req.run]] * 2,
                        "hostProbeNs": (probe or {}).get(req.run, 600.0)}
            preds = {g: {**pred(steps[req.run]), **readings} for g in req.predict_for}
            search.record(req, {**ok(30), "node": (node or {}).get(req.run, "n1")}, preds, key=f"k{req.run}")
    return asked


def test_a_run_made_in_a_slow_phase_of_the_cpu_is_set_aside_and_another_made():
    search = Search(parse(doc(**ONE_PROGRAM)))
    # Run 1's steady steps read the Python yardstick 1.4 times the quickest run's: it ran in a slow phase.
    asked = cpu_drive(search, {0: 0.40, 1: 0.30, 2: 0.34, 3: 0.36}, {0: 500, 1: 700, 2: 505, 3: 510})
    assert asked == [0, 1, 2, 3]
    [(_, o)] = search.outcomes()
    assert o.prediction["stepTimeSeconds"] == 0.36 and o.prediction["emulationsStepTimeSeconds"] == [0.34, 0.36, 0.40]
    assert o.prediction["emulationsSlowPhaseStepTimeSeconds"] == [0.30]
    out = status(choose(search.plan, search.outcomes()), searched=1, emulations=search.emulations,
                 search=search.method, limit=None)
    assert out["recommendation"]["emulationsSlowPhaseStepTimeSeconds"] == [0.30]


def test_a_run_whose_probe_read_in_a_slow_phase_is_set_aside():
    search = Search(parse(doc(**ONE_PROGRAM)))
    asked = cpu_drive(search, {0: 0.40, 1: 0.30, 2: 0.34, 3: 0.36}, {0: 500, 1: 500, 2: 500, 3: 500},
                      probe={1: 900.0})
    assert asked == [0, 1, 2, 3]
    assert search.outcomes()[0][1].prediction["emulationsSlowPhaseStepTimeSeconds"] == [0.30]


@pytest.mark.parametrize("why", ["another node", "repeats fixed"])
def test_readings_are_not_compared_across_nodes_nor_where_the_plan_fixes_the_runs(why):
    emulation = {"repeats": 3} if why == "repeats fixed" else {}
    search = Search(parse(doc(**ONE_PROGRAM, emulation=emulation)))
    node = {1: "n2"} if why == "another node" else None
    asked = cpu_drive(search, {0: 0.40, 1: 0.30, 2: 0.34}, {0: 500, 1: 700, 2: 505}, node=node)
    assert sorted(asked) == [0, 1, 2]
    p = search.outcomes()[0][1].prediction
    assert p["stepTimeSeconds"] == 0.34 and "emulationsSlowPhaseStepTimeSeconds" not in p


def test_spare_runs_are_capped_and_a_question_in_slow_phases_keeps_its_quick_runs():
    search = Search(parse(doc(**ONE_PROGRAM)))
    asked = cpu_drive(search, {0: 0.40, 1: 0.30, 2: 0.31, 3: 0.32, 4: 0.33}, {0: 500, 1: 700, 2: 700, 3: 700, 4: 700})
    assert asked == [0, 1, 2, 3, 4]  # three wanted, two spares at most
    p = search.outcomes()[0][1].prediction
    assert p["stepTimeSeconds"] == 0.40 and p["emulationsSlowPhaseStepTimeSeconds"] == [0.30, 0.31, 0.32, 0.33]


def test_a_program_slow_on_every_run_against_its_nodes_usual_pace_asks_for_its_spares(tmp_path, monkeypatch):
    from maya.usual_pace import MIN_READINGS, UsualPace

    monkeypatch.delenv("MAYA_USUAL_PACE", raising=False)

    stores = {node: UsualPace(tmp_path / f"{node}.json") for node in ("n1", "n2")}
    stores["n1"].remember({f"before#{k}": 500 for k in range(MIN_READINGS)})
    # Each run agrees with the others (the first two within 1% too), all at 1.4 times n1's usual reading.
    search = Search(parse(doc(**ONE_PROGRAM)), usual=stores.__getitem__)
    asked = cpu_drive(search, {0: 0.300, 1: 0.301, 2: 0.31, 3: 0.32, 4: 0.33}, dict.fromkeys(range(5), 700))
    assert asked == [0, 1, 2, 3, 4]  # three wanted, two spares
    p = search.outcomes()[0][1].prediction
    assert p["stepTimeSeconds"] == 0.31 and "emulationsSlowPhaseStepTimeSeconds" not in p  # all kept
    assert p["paceOverUsual"] == pytest.approx(1.4)
    assert p["stepTimeSecondsLow"] <= 0.31 * (1 - 0.3 * (1 - 1 / 1.4)) + 1e-12  # down to the usual pace's share
    out = status(choose(search.plan, search.outcomes()), searched=1, emulations=search.emulations,
                 search=search.method, limit=None)
    assert out["recommendation"]["paceOverUsual"] == pytest.approx(1.4)
    assert len(json.loads(stores["n1"].path.read_text())) == MIN_READINGS + 10  # five runs, two ranks each
    # The same runs on a node with nothing remembered: two that agree settle it, as before.
    search = Search(parse(doc(**ONE_PROGRAM)), usual=stores.__getitem__)
    asked = cpu_drive(search, {0: 0.300, 1: 0.301}, {0: 700, 1: 700}, node={0: "n2", 1: "n2"})
    assert asked == [0, 1] and "paceOverUsual" not in search.outcomes()[0][1].prediction


def test_a_run_says_which_node_it_ran_on(tmp_path, monkeypatch):
    import socket

    from maya.plan.evaluate import run_result

    (tmp_path / "summary.json").write_text(json.dumps({"gpu": {"name": H200}, "ranks": [{"rank": 0}]}))
    monkeypatch.delenv("MAYA_NODE_NAME", raising=False)
    assert run_result(tmp_path, 0, "")["node"] == socket.gethostname()
    monkeypatch.setenv("MAYA_NODE_NAME", "cpu-node-7")  # in a pod: its node, from the downward API
    assert run_result(tmp_path, 0, "")["node"] == "cpu-node-7"


def test_an_oom_micro_batch_prunes_the_larger_ones_before_they_run():
    d = doc(batch={"global": 64, "microBatchArg": "--batch", "microBatches": [16, 32, 64], "accumulationArg": "--a"},
            resources=[{"gpu": H100}], knobs=[])
    plan = parse(d)
    search = Search(plan)
    results = {(16, 1, False): ok(30), (32, 1, False): oom(90), (64, 1, False): ok(1)}
    drive(search, results, STEPS)
    o = {c.micro_batch: out for c, out in search.outcomes()}
    assert o[32].status == "oom"
    assert o[64].status == "pruned" and "micro-batch 32 already ran out of memory" in o[64].reason
    assert search.emulations["ran"] == 2


def _status(plan_doc: dict[str, Any]) -> dict[str, Any]:
    plan = parse(plan_doc)
    search = Search(plan)
    drive(search, RESULTS, STEPS)
    choice = choose(plan, search.outcomes() + skipped_outcomes(search.skipped))
    return status(choice, searched=len(search.candidates) + len(search.skipped), emulations=search.emulations,
                  search=search.method, limit=None)


def test_the_choice_under_each_objective_and_deadline():
    no_deadline = doc()
    del no_deadline["spec"]["deadline"]
    cost = _status(no_deadline)
    rec = cost["recommendation"]
    # Cost per step: H100 at 3 USD/h and 0.27-0.30 s beats H200 at 4 USD/h and 0.9x the time.
    assert (rec["gpu"], rec["gpus"]) == (H100, 1) and cost["phase"] == "Recommended"
    fastest = _status(doc(objective="time"))
    assert fastest["recommendation"]["gpus"] == 2 and fastest["recommendation"]["gpu"] == H200
    # 20000 steps in 1h only the two-GPU shapes make (0.27 s x 0.9 / 2 per step).
    tight = _status(doc(deadline={"steps": 20000, "duration": "1h"}))
    assert tight["recommendation"]["gpus"] == 2
    assert all(c["meetsDeadline"] is False for c in tight["candidates"] if c["status"] == "ok" and c["gpus"] == 1)
    impossible = _status(doc(deadline={"steps": 20000, "duration": "10m"}))
    assert impossible["phase"] == "Failed" and impossible["recommendation"] is None
    message = impossible["conditions"][0]["message"]
    assert impossible["conditions"][0]["reason"] == "DeadlineUnreachable"
    assert message.startswith("spec.deadline: no candidate trains 20000 steps within 10m; the fastest")


def test_ties_within_the_uncertainty_go_to_the_cheapest():
    s = _status(doc(objective="time"))
    rec = s["recommendation"]
    # Micro-batches 32 and 16 x accumulation on 2 x H200 lie within 3% of each other: a tie, broken by cost.
    assert s["ties"] and all(t["stepTimeSecondsLow"] <= rec["stepTimeSecondsHigh"] for t in s["ties"])
    assert all(t["costPerStepUSD"] >= rec["costPerStepUSD"] for t in s["ties"])


def test_the_status_json_has_the_operators_fields():
    import jsonschema

    s = _status(doc())
    assert set(s) >= {"phase", "recommendation", "candidates", "conditions", "searchedCandidates", "emulations"}
    for c in [s["recommendation"], *s["candidates"]]:
        jsonschema.validate(c, CANDIDATE_SCHEMA)
        assert {"gpu", "gpusPerNode", "nodes", "microBatch", "gradientAccumulation", "knobs", "fits",
                "stepTimeSeconds", "peakMemoryBytes", "costPerStepUSD", "meetsDeadline", "status", "reason"} <= set(c)
    assert s["searchedCandidates"] == 18
    statuses = [c["status"] for c in s["candidates"]]
    assert statuses.count("pruned") == 2 and "oom" in statuses
    assert {c["type"] for c in s["conditions"]} == {"Recommended", "Degraded"}
    rec = s["recommendation"]
    assert rec["costPerStepUSD"] == pytest.approx(rec["stepTimeSeconds"] * 3.0 / 3600)


def test_every_candidate_out_of_memory_says_the_smallest_shortfall():
    results = {k: oom(200 if k[0] == 64 else 150) for k in RESULTS}
    plan = parse(doc())
    search = Search(plan)
    drive(search, results, STEPS)
    choice = choose(plan, search.outcomes() + skipped_outcomes(search.skipped))
    assert choice.recommendation is None and choice.problem is not None
    assert choice.problem[0] == "OutOfMemory" and "every candidate runs out of memory" in choice.problem[1]


def test_a_failed_script_is_reported_once():
    failed = {"status": "failed", "exitCode": 1, "peakReservedBytes": 0, "peakAllocatedBytes": 0,
              "error": "Traceback ...\nValueError: bad --batch"}
    plan = parse(doc())
    search = Search(plan)
    req = search.next(1)[0]
    search.record(req, failed, {})
    assert search.finished()  # the first emulation failed: the search stops by itself
    choice = choose(plan, search.outcomes() + skipped_outcomes(search.skipped))
    assert choice.problem is not None and choice.problem[0] == "EmulationFailed"
    assert choice.problem[1].count("ValueError: bad --batch") == 1


def test_a_large_space_is_sampled_under_an_emulation_budget():
    d = doc(search={"exhaustiveUpTo": 4, "maxEmulations": 5, "sampler": "tpe", "seed": 1})
    plan = parse(d)
    search = Search(plan)
    assert search.sampled and "optuna TPE" in search.method
    runs = drive(search, RESULTS, STEPS)
    assert runs <= 5
    outcomes = [o for _, o in search.outcomes()]
    assert any(o.status == "ok" for o in outcomes)
    assert any(o.reason.startswith("not sampled") for o in outcomes)


def test_the_budget_counts_programs_and_each_host_bound_one_is_emulated_again():
    search = Search(parse(doc(search={"exhaustiveUpTo": 4, "maxEmulations": 5, "sampler": "tpe", "seed": 1})))
    runs = drive(search, RESULTS, STEPS, host=0.4)  # each program's runs agree: two each, no third
    ok_programs = sum(d.result["status"] == "ok" for d in search.done.values())
    assert len(search.done) == 5 and ok_programs >= 1  # five programs, whatever their further runs
    assert runs == search.completed() == search.needed() == len(search.done) + ok_programs


def test_the_crd_matches_the_schema_and_its_copies():
    from maya.operator.crd import render

    text = render()
    assert (ROOT / "crds" / "trainingplans.maya.dev.yaml").read_text() == text, \
        "crds/ drifted from maya/plan/schema.py: run python -m maya.operator.crd > crds/trainingplans.maya.dev.yaml"
    crd = yaml.safe_load(text)
    spec = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    assert spec["required"] == ["command", "batch", "resources"]
    assert spec["properties"]["objective"]["enum"] == ["cost", "time"]
    assert spec["properties"]["batch"]["properties"]["global"]["minimum"] == 1
    assert crd["spec"]["names"]["shortNames"] == ["tp"]
    assert [c["name"] for c in crd["spec"]["versions"][0]["additionalPrinterColumns"]][:3] == ["Phase", "GPU", "GPUs"]
    assert "status" in crd["spec"]["versions"][0]["subresources"]


def test_data_dependent_reads_reach_the_candidates_and_the_report(tmp_path, capsys):
    import json

    import jsonschema

    from maya.plan.evaluate import DEVICE_VALUE_LINES, run_result
    from maya.plan.report import print_report

    assumed = [{"operation": "bincount", "where": f"moe.py:{n}", "count": 8, "as": "counts spread evenly over the bins"}
               for n in range(5)]
    unknown = [{"operation": "nonzero", "where": "route.py:7", "count": 16}]
    rank = {"rank": 0, "peak_reserved_bytes": 10 * GIB, "peak_allocated_bytes": 9 * GIB,
            "device_values": {"assumed": assumed, "unknown": unknown}}
    (tmp_path / "summary.json").write_text(json.dumps({"gpu": {"name": H200}, "ranks": [rank]}))
    result = run_result(tmp_path, 0, "")
    assert result["deviceValues"] == {"assumed": assumed[:DEVICE_VALUE_LINES], "unknown": unknown}
    del rank["device_values"]
    (tmp_path / "summary.json").write_text(json.dumps({"gpu": {"name": H200}, "ranks": [rank]}))
    assert "deviceValues" not in run_result(tmp_path, 0, "")  # nothing read: nothing said

    plan = parse(doc())
    search = Search(plan)
    while not search.finished():
        for req in search.next(4):
            search.record(req, {**ok(10), "deviceValues": result["deviceValues"]},
                          {g: pred(0.3) for g in req.predict_for}, key="k")
    s = status(choose(plan, search.outcomes()), searched=len(search.candidates), emulations={}, search="test")
    rec = s["recommendation"]
    jsonschema.validate(rec, CANDIDATE_SCHEMA)
    assert rec["deviceValues"] == result["deviceValues"]
    print_report(s, None)
    out = capsys.readouterr().out
    assert "bincount at moe.py:0 (x8): counts spread evenly over the bins" in out
    assert "nonzero at route.py:7 (x16)" in out
