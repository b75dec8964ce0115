"""Data-dependent results under emulation (maya/_hook/_maya_device_values.py): token counts and
coalesced sparse gradients get their expected values, other reads of device values are reported by
program line, and nothing of it happens outside the emulating interposer."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from emulated import REPO, run_emulated

from maya.summary import device_value_lines

sys.path.insert(0, str(REPO / "maya" / "_hook"))
from _maya_device_values import distinct_draws  # noqa: E402


def test_distinct_draws_is_the_expected_number_of_distinct_rows() -> None:
    assert distinct_draws(4096, 1000) == 983  # 1000 * (1 - (1 - 1/1000)**4096)
    assert distinct_draws(65536, 4_000_000) in range(65000, 65536)  # almost every draw is a new row
    assert distinct_draws(65536, 50) == 50
    assert distinct_draws(10, 1) == 1
    assert distinct_draws(0, 100) == 0


SCRIPT = """
import json, torch
experts = torch.randint(0, 8, (1000,), device="cuda")
counts = torch.bincount(experts, minlength=8).tolist()
again = torch.bincount(experts, minlength=8).tolist()
histogram = torch.histc(experts.float(), bins=4, min=0, max=8).tolist()
address = torch.bincount(experts, minlength=8).data_ptr()  # freed at once: its memory is zeroed again
reused = torch.empty(8, dtype=torch.int64, device="cuda")
emb = torch.nn.Embedding(1000, 16, sparse=True).cuda()
emb(torch.randint(0, 1000, (4096,), device="cuda")).sum().backward()
grad = emb.weight.grad.coalesce()
torch.optim.SparseAdam(emb.parameters()).step()
picked = torch.nonzero(experts > 3)
print(json.dumps({"counts": counts, "again": again, "histogram": histogram, "rows": grad._nnz(), "coalesced": grad.is_coalesced(),
                  "values": list(grad._values().shape), "reused": reused.data_ptr() == address,
                  "reused_reads": reused.tolist(), "picked": list(picked.shape)}))
"""


def test_data_dependent_results_get_expected_values(tmp_path: Path) -> None:
    r = run_emulated(SCRIPT, tmp_path)
    assert r.returncode == 0, r.output
    out = json.loads(r.stdout.strip().splitlines()[-1])
    # token counts: the 1000 items drawn uniformly over the bins (zeros without the hook)
    assert sum(out["counts"]) == 1000 and all(80 <= c <= 170 for c in out["counts"])  # 125 +- 4.3 sd
    assert sum(out["histogram"]) == 1000 and all(180 <= c <= 320 for c in out["histogram"])
    assert out["counts"] != out["again"] and sum(out["again"]) == 1000  # drawn afresh each call, as steps differ
    # a sparse gradient of 4096 rows of a 1000-row table coalesces to the rows uniform draws give
    assert out["rows"] == 983 and out["coalesced"] and out["values"] == [983, 16]
    # the counts do not outlive their tensor: the allocator's next block there reads zeros
    assert out["reused"] and out["reused_reads"] == [0] * 8
    # nonzero has no expected value: zeros, reported at its line
    assert out["picked"] == [0, 1]
    values = r.rank0["device_values"]
    assumed = {(a["operation"], a["where"]): a["count"] for a in values["assumed"]}
    assert assumed == {("bincount", "script.py:4"): 1, ("bincount", "script.py:5"): 1, ("histc", "script.py:6"): 1,
                       ("bincount", "script.py:7"): 1, ("coalesce", "script.py:11"): 1, ("coalesce", "script.py:12"): 1}
    unknown = {(u["operation"], u["where"]) for u in values["unknown"]}
    assert unknown == {("nonzero", "script.py:13"), (".tolist()", "script.py:16")}
    lines = device_value_lines(r.rank0["device_values"])
    assert "bincount at script.py:4 (x1): counts of items drawn uniformly over the bins" in lines[0]
    assert "nonzero at script.py:13 (x1)" in lines[1] and "may differ from a real GPU's" in lines[1]
    assert "drawn as a balanced router's" in lines[2]  # bincount's counts
    assert any("nonzero at script.py:13" in line for line in r.stdout.splitlines() + r.stderr.splitlines())


def test_a_job_without_data_dependent_reads_says_nothing(tmp_path: Path) -> None:
    r = run_emulated("import torch\nx = torch.ones(4, device='cuda')\nprint(float((x * 2).sum().item()))", tmp_path)
    assert r.returncode == 0, r.output
    assert r.rank0["device_values"] == {"assumed": [], "unknown": []}  # a float read (a loss) is not reported
    assert device_value_lines(r.rank0["device_values"], r.rank0["device_reads"]) == []


def test_outside_the_emulating_interposer_torch_is_untouched() -> None:
    """On a real GPU (record mode) or with no interposer, the hook leaves torch's operations alone."""
    env = {**os.environ, "PYTHONPATH": str(REPO / "maya" / "_hook")}
    code = "import torch, sys; print(torch.bincount is torch._C._VariableFunctions.bincount, " \
           "'_maya_device_values' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["True", "False"]


@pytest.mark.parametrize(("operation", "router"), [("bincount", True), ("topk", True), ("coalesce", False)])
def test_a_routers_counts_warn_of_the_gemm_shapes_they_change(operation: str, router: bool) -> None:
    """A router's counts differ every step, and so do the shapes of the GEMMs they size: a cost of the
    real host (benchmarks.held_out.new_shapes) that the drawn counts pay in part, and a real router's more."""
    values = {"assumed": [{"operation": operation, "where": "moe.py:50", "count": 40, "as": "..."}], "unknown": []}
    lines = device_value_lines(values)
    assert any("GEMMs they size take shapes the process has not run" in line for line in lines) == router


@pytest.mark.parametrize("values", [None, {"assumed": [], "unknown": []}])
def test_without_the_hook_report_the_bare_count_of_reads_is_said(values: dict | None) -> None:
    assert (device_value_lines(values, device_reads=3) != []) == (values is None)


ROUTED = """
import gc, json, torch
import torch.nn.functional as F
E, K, N = 8, 2, 64
logits = torch.randn(N, E, device="cuda")
weights, selected = torch.topk(logits.softmax(-1), K, dim=-1)
mask = F.one_hot(selected, num_classes=E).permute(2, 1, 0)
hit = torch.greater(mask.sum(dim=(-1, -2)), 0).nonzero()
sizes = []
for e in hit:
    idx, top_x = torch.where(mask[e].squeeze(0))
    sizes.append(top_x.shape[0])
every = [torch.where(mask[e])[1].shape[0] for e in range(E)]
rows, cols = torch.where(mask[0])
host_rows, host_cols = torch.where(F.one_hot(selected.cpu(), num_classes=E).permute(2, 1, 0)[0])
layout = {"contiguous": rows.is_contiguous() and cols.is_contiguous(), "hit_strides": list(hit.stride()),
          "agree": torch.equal(rows.cpu(), host_rows) and torch.equal(cols.cpu(), host_cols)}
del rows, cols
counts = mask.sum(dim=(1, 2)).int().tolist()
offsets = torch.cumsum(torch.bincount(selected.flatten(), minlength=E), 0).tolist()
top1 = torch.argmax(logits, dim=-1)[:10].tolist()
del logits, weights, selected, mask, hit, e, idx, top_x
gc.collect()
print(json.dumps({"hit": len(sizes), "sizes": sizes, "every": every, "counts": counts, "offsets": offsets,
                  "top1": top1, "layout": layout, "wrapped_after": "__getitem__" in torch.Tensor.__dict__}))
"""


def test_a_routers_choice_and_what_is_computed_from_it_agree(tmp_path: Path) -> None:
    """HF Mixtral's routing: topk -> one_hot -> sum -> greater -> nonzero, then torch.where per expert."""
    r = run_emulated(ROUTED, tmp_path)
    assert r.returncode == 0, r.output
    out = json.loads(r.stdout.strip().splitlines()[-1])
    # 64 tokens x top-2 over 8 experts, drawn: 16 each on average (without the router's choice, no expert is hit)
    counts = out["counts"]  # a cast before the read keeps the values
    assert sum(counts) == 128 and len(counts) == 8 and counts != [16] * 8
    assert out["hit"] == 8 and out["sizes"] == counts and out["every"] == counts  # torch.where per expert agrees
    assert out["offsets"] == [sum(counts[:i + 1]) for i in range(8)]  # cumsum of the bincount of the choice
    assert all(0 <= e < 8 for e in out["top1"]) and len(set(out["top1"])) > 1
    # laid out as CUDA's nonzero lays out its indices (transposed), so torch.where's are contiguous
    assert out["layout"] == {"contiguous": True, "hit_strides": [1, 8], "agree": True}
    assert out["wrapped_after"] is False  # no known values left: Tensor's methods are its own again
    assumed = {(a["operation"], a["where"]): a["count"] for a in r.rank0["device_values"]["assumed"]}
    assert assumed[("topk", "script.py:6")] == 1 and assumed[("nonzero", "script.py:11")] == 8
    assert r.rank0["device_values"]["unknown"] == []


MEGATRON = """
import json, torch
E, K, N = 8, 2, 64
scores = torch.randn(N, E, device="cuda").softmax(-1)
probs, top_indices = torch.topk(scores, k=K, dim=1)
routing_map = torch.zeros_like(scores).int().scatter(1, top_indices, 1).bool()
tokens_per_expert = routing_map.sum(dim=0).to(torch.device("cpu"), non_blocking=True)
torch.cuda.current_stream().synchronize()
print(json.dumps({"counts": tokens_per_expert.tolist()}))
"""


def test_a_routers_choice_scattered_into_a_zeroed_map_is_counted(tmp_path: Path) -> None:
    """Megatron's routing map: zeros_like(scores).int().scatter(1, topk indices, 1), summed per expert."""
    r = run_emulated(MEGATRON, tmp_path)
    assert r.returncode == 0, r.output
    counts = json.loads(r.stdout.strip().splitlines()[-1])["counts"]
    assert sum(counts) == 128 and len(counts) == 8  # 64 tokens x top-2, drawn over 8 experts


IN_PLACE = """
import json, torch
E, K, N = 8, 2, 64
_, top = torch.topk(torch.randn(N, E, device="cuda"), K, dim=-1)
counts = top.new_zeros(E)
counts.scatter_add_(0, top.flatten(), torch.ones_like(top.flatten()))  # known arguments: done on the host too
first = counts.tolist()
counts.add_(torch.randint(0, 3, (E,), device="cuda"))  # an unknown one: known no longer
second = counts.tolist()
print(json.dumps({"first": first, "second": second}))
"""


def test_in_place_changes_keep_known_values_right_or_forget_them(tmp_path: Path) -> None:
    r = run_emulated(IN_PLACE, tmp_path)
    assert r.returncode == 0, r.output
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert sum(out["first"]) == 128 and len(out["first"]) == 8
    unknown = {(u["operation"], u["where"]) for u in r.rank0["device_values"]["unknown"]}
    assert unknown == {(".tolist()", "script.py:9")}


def test_factories_under_a_device_context_still_get_the_device(tmp_path: Path) -> None:
    """``with torch.device("cuda")`` finds torch.zeros and torch.ones by identity: the hook must leave them be."""
    script = ("import torch\nwith torch.device('cuda'):\n    bn = torch.nn.BatchNorm1d(4)\n"
              "print(bn.running_mean.device.type, torch.zeros(2).device.type, torch.ones(2).device.type)")
    r = run_emulated(script, tmp_path)
    assert r.returncode == 0, r.output
    assert r.stdout.split()[-3:] == ["cuda", "cpu", "cpu"]


def test_torchscript_still_compiles_calls_of_wrapped_operations(tmp_path: Path) -> None:
    """TorchScript finds torch's operations by identity: a script calling torch.where, torch.sum, topk or
    unique must compile under emulation as on a GPU."""
    (tmp_path / "scripted.py").write_text(
        "import torch\n\n\ndef route(x: torch.Tensor) -> torch.Tensor:\n"
        "    top = torch.topk(x, 2, dim=-1)[1]\n"
        "    mask = torch.nn.functional.one_hot(top, 8).sum(1)\n"
        "    return torch.where(torch.gt(torch.sum(mask, dim=0), 0), 1, 0) + torch.unique(top).sum()\n")
    script = (f"import sys, torch\nsys.path.insert(0, {str(tmp_path)!r})\nimport scripted\n"
              "f = torch.jit.script(scripted.route)\nprint('compiled', f(torch.randn(16, 8, device='cuda')).shape)")
    r = run_emulated(script, tmp_path)
    assert r.returncode == 0, r.output
    assert "compiled torch.Size([8])" in r.stdout


def test_the_drawn_values_are_the_same_in_every_emulation(tmp_path: Path) -> None:
    """The draws are seeded: the same program emulated twice routes alike, so its answers agree."""
    (tmp_path / "a").mkdir(), (tmp_path / "b").mkdir()
    first, second = (run_emulated(ROUTED, tmp_path / name) for name in ("a", "b"))
    assert first.returncode == 0 and second.returncode == 0, first.output + second.output
    assert first.stdout.strip().splitlines()[-1] == second.stdout.strip().splitlines()[-1]


PACKED = """
import json, torch
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence
x = torch.randn(5, 7, 3, device="cuda")
lengths = torch.tensor([3, 7, 1, 5, 2])
for _ in range(2):  # the second batch's memory is the first's: the inverse must not read what it left
    packed = pack_padded_sequence(x, lengths, batch_first=True, enforce_sorted=False)
    y, back = pad_packed_sequence(packed, batch_first=True, total_length=7)
print(json.dumps({"lengths": back.tolist(), "sorted": packed.sorted_indices.cpu().tolist(),
                  "unsorted": packed.unsorted_indices.cpu().tolist()}))
"""


def test_a_packed_batch_of_unsorted_lengths_comes_back_in_its_order(tmp_path: Path) -> None:
    """pack_padded_sequence(enforce_sorted=False) inverts the host's order on the device, where the scatter does
    not run: pad_packed_sequence read the lengths with whatever that memory held (an index out of range).
    The inverse is computed on the host from the order's real values."""
    r = run_emulated(PACKED, tmp_path)
    assert r.returncode == 0, r.output
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert out["lengths"] == [3, 7, 1, 5, 2]
    assert out["sorted"] == [1, 3, 0, 4, 2] and out["unsorted"] == [2, 0, 4, 1, 3]
    assert not r.rank0["device_values"]["assumed"]  # computed, not assumed
