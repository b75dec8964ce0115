"""Training steps found from the repeating structure of a trace (maya.predictor.replay.iterations).

Covers: a loop whose first step is irregular (extra operations, as cuDNN's
benchmark trials make) and that ends with an epilogue; gradient
accumulation (the whole step is the period, not the micro-batch); long
repeats in the set-up and layers repeated within a step are not steps; a
sequence that never repeats, or repeats only once, is refused with a
message; an emulated training script: steps found on the thread that issues
the most device operations, warm-up excluded.
"""

from __future__ import annotations

import random

import pytest
from emulated import requires_library, run_emulated

from maya.predict import predict_folder
from maya.predictor.replay.iterations import NoIterations, find_steps, trace_steps
from maya.predictor.trace import read_trace
from maya.predictor.trace.ops import thread_names


def test_irregular_first_step_and_epilogue() -> None:
    step = ["embed", "gemm", "softmax", "gemm", "loss", "gemm_bwd", "gemm_bwd", "adam", "sync"]
    first = ["embed", "gemm", "trial", "trial", "gemm", "softmax", "gemm", "loss", "gemm_bwd", "init_state",
             "gemm_bwd", "adam", "sync"]
    keys = ["setup", "fill", *first, *step * 5, "save", "sync"]
    assert find_steps(keys).period == len(step)
    assert find_steps(keys).warmup < 2 + len(first)  # the first step's last three operations are steady already
    steps = find_steps(keys, boundary=lambda k: k == "sync")
    assert steps.period == len(step)
    assert steps.count == 5
    assert steps.warmup == 2 + len(first)
    assert [keys[s] for s in steps.starts] == ["embed"] * 5
    assert steps.tail == 2


def test_gradient_accumulation_period_is_the_whole_step() -> None:
    micro = ["fwd", "gemm", "bwd", "gemm_bwd"]
    step = micro * 4 + ["clip", "adam", "zero"]
    steps = find_steps(["init"] + step * 3)
    assert steps.period == len(step) and steps.count == 3 and steps.warmup == 1


def test_repeats_before_the_loop_or_inside_a_step_are_not_steps() -> None:
    """Parameter fills at set-up repeat longer than two short steps do; a step repeats its layers."""
    layer = ["ln", "gemm", "attn", "gemm", "ln", "gemm", "gelu", "gemm"]
    step = ["embed", *layer * 6, "loss", *["bwd"] * 40, "adam", "sync"]
    keys = ["fill"] * 3000 + ["state"] + step * 3 + ["print"]
    steps = find_steps(keys)
    assert steps.period == len(step) and steps.count == 3 and steps.tail == 1


def test_no_loop_is_refused() -> None:
    with pytest.raises(NoIterations, match="at least 2 identical training steps"):
        find_steps([f"op{i}" for i in range(50)])
    with pytest.raises(NoIterations):
        find_steps(["a", "b", "c", "a", "x", "y"])  # "a" repeats, but no whole step does


def _packed_step(rng: random.Random) -> list[str]:
    """One step of a packed-batch loop: a read of the lengths, a copy or a kernel per distinct length (as
    many as the batch has, in an order of its own), the RNN, the loss's reads, the optimizer, a sync."""
    per_length = [rng.choice(["copy", "fill"]) for _ in range(rng.randrange(30, 48))]
    return ["h2d", "gather", "sync_read", *per_length, "lstm", "scatter", "sync_read", "loss", "lstm_bwd", "sgd",
            "sync"]


def test_steps_that_differ_in_their_operations_are_cut_at_the_loops_waits() -> None:
    """A packed batch of lengths that change every step launches one copy per length, so no two steps are
    alike and the longest repeat near the end was a run of those copies, timed as a step of one copy (0.01 ms
    for a 17 ms step of the held-out tagger).  The loop still waits at the same places of every step, with
    the same kinds of operation between: the steps are cut there, each as long as it is."""
    rng = random.Random(0)
    waits = {"sync", "sync_read"}
    steps_ops = [_packed_step(rng) for _ in range(8)]
    keys = ["setup", "sync", "init", "sync_read", *(k for step in steps_ops for k in step)]
    steps = find_steps(keys, boundary=waits.__contains__)
    assert not steps.alike and steps.period == 0
    lengths = [len(s) for s in steps_ops]
    assert [b - a for a, b in zip(steps.starts, [*steps.starts[1:], steps.end], strict=True)] == lengths[-steps.count:]
    assert steps.count >= 6 and steps.end == len(keys) and steps.tail == 0
    assert all(keys[s] == "h2d" for s in steps.starts)  # each begins where the loop's step does
    # alike steps with the same waits are found as before, as a period
    alike = ["setup", *(["h2d", "sync_read", *["copy"] * 40, "lstm", "loss", "sync_read", "sgd", "sync"] * 4)]
    found = find_steps(alike, boundary=waits.__contains__)
    assert found.alike and found.count >= 3


def test_two_alike_steps_are_kept_where_the_waits_cut_them_so_and_a_chance_pair_is_not() -> None:
    """With only two alike steps, the waits may repeat for longer: over a first step of the same kinds of
    operation (cuDNN's trials run more of the same convolutions), which must stay out; or because the steps
    differ and two of them repeat by chance (a step of 12 copies as long as the stretch two others span)."""
    waits = {"sync", "sync_read"}
    keys = ["sync", "embed", "sync_read", *["conv"] * 9, "lstm", "sync"]
    keys += ["embed", "sync_read", *["conv"] * 3, "lstm", "sync"] * 2
    steps = find_steps(keys, boundary=waits.__contains__)
    assert steps.alike and steps.period == 7 and steps.count == 2
    chance = ["sync"]
    for copies in (5, 9, 6, 12, 7, 10):
        chance += ["embed", "sync_read", *["copy"] * copies, "lstm", "sync"]
    steps = find_steps(chance, boundary=waits.__contains__)
    assert not steps.alike and steps.count == 6 and steps.end == len(chance)


def test_steps_that_differ_after_a_set_up_of_many_alike_waits() -> None:
    """A set-up that waits after each of many copies (a model's parameters moved one by one) repeats its one
    stretch between waits for longer than the loop's steps repeat theirs; the steps still come last."""
    rng = random.Random(1)
    waits = {"sync", "sync_read"}
    keys = ["h2d", "sync"] * 30
    steps_ops = [_packed_step(rng) for _ in range(8)]
    keys += [k for step in steps_ops for k in step]
    steps = find_steps(keys, boundary=waits.__contains__)
    assert not steps.alike and steps.end == len(keys)
    assert [b - a for a, b in zip(steps.starts, [*steps.starts[1:], steps.end], strict=True)] == [
        len(s) for s in steps_ops][-steps.count:]


def test_steps_whose_waits_do_not_repeat_either_are_refused() -> None:
    """Where neither the operations nor the stretches between the waits repeat, nothing is timed."""
    waits = {"sync", "sync_read"}
    keys = ["setup"]
    for step in range(6):
        keys += ["h2d", "sync_read", f"pack{step}", "copy", "copy", f"lstm{step}", "loss", "sync_read", "sgd", "sync"]
    keys += ["h2d", "sync_read", *["copy"] * 40, "lstm", "sync"]
    with pytest.raises(NoIterations, match="steps differ in their operations"):
        find_steps(keys, boundary=waits.__contains__)


@pytest.mark.emulation
@requires_library
def test_an_emulated_loop_of_packed_batches_is_timed_step_by_step(tmp_path) -> None:
    """Packed batches of changing lengths under emulation: the steps are found (each as long as it is), and
    `maya predict` times them."""
    script = """
import torch
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence
g = torch.Generator().manual_seed(0)
lstm = torch.nn.LSTM(16, 32, batch_first=True, bidirectional=True).cuda()
opt = torch.optim.SGD(lstm.parameters(), lr=0.1)
for step in range(8):
    lengths = torch.randint(3, 25, (16,), generator=g)
    x = torch.randn(16, 24, 16).pin_memory().to("cuda", non_blocking=True)
    packed = pack_padded_sequence(x, lengths, batch_first=True, enforce_sorted=False)
    y, _ = pad_packed_sequence(lstm(packed)[0], batch_first=True, total_length=24)
    y.square().mean().backward()
    opt.step()
    opt.zero_grad(set_to_none=True)
    torch.cuda.synchronize()
"""
    run = run_emulated(script, tmp_path)
    assert run.returncode == 0, run.output
    steps, records = trace_steps(read_trace(run.trace_path()))
    assert not steps.alike and steps.count >= 5
    assert len({b - a for a, b in zip(steps.starts, [*steps.starts[1:], steps.end], strict=True)}) > 1  # lengths differ
    prediction = predict_folder(run.trace_path().parent, "H100-SXM-80GB")
    assert prediction.step_time_s > 0 and len(prediction.steps_s) == steps.count


@pytest.mark.emulation
@requires_library
def test_emulated_training_loop(tmp_path) -> None:
    script = """
import torch
model = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.GELU(), torch.nn.Linear(256, 64)).cuda()
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
for step in range(5):
    loss = model(torch.randn(32, 64, device="cuda")).square().mean()
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)
    torch.cuda.synchronize()
"""
    run = run_emulated(script, tmp_path)
    assert run.returncode == 0, run.output
    steps, records = trace_steps(read_trace(run.trace_path()))
    # Step 0 creates AdamW's state and is not steady; at least three of the other four are.
    assert steps.count >= 3 and steps.warmup > 0
    assert len(records) >= steps.warmup + steps.count * steps.period
    with pytest.raises(NoIterations, match="no device operations from a thread named 'nope'"):
        trace_steps(read_trace(run.trace_path()), thread="nope")


@requires_library
@pytest.mark.emulation
def test_the_loop_thread_not_autograds_when_cudnn_benchmark_times_its_trials(tmp_path) -> None:
    """With cudnn.benchmark the backward pass times its trials on autograd's thread, which then waits for the
    device and issues more operations than the loop: the steps are still the loop's."""
    script = """
import torch
torch.backends.cudnn.benchmark = True
conv = torch.nn.Sequential(*[torch.nn.Conv2d(16, 16, 3, padding=1) for _ in range(6)]).cuda()
opt = torch.optim.SGD(conv.parameters(), lr=0.1)
for step in range(5):
    x = torch.randn(8, 16, 32, 32, device="cuda")
    conv(x).square().mean().backward()
    opt.step()
    opt.zero_grad(set_to_none=True)
    torch.cuda.synchronize()
"""
    run = run_emulated(script, tmp_path)
    assert run.returncode == 0, run.output
    trace = read_trace(run.trace_path())
    steps, records = trace_steps(trace)
    threads = {int(trace.records["thread"][i]) for i in records}
    names = thread_names(trace)
    assert len(threads) == 1 and not names.get(threads.pop(), "").startswith("pt_autograd_")
    assert steps.count >= 3


def test_many_steps_of_many_repeated_layers_with_two_waits_each() -> None:
    """With more steps than RARE, no operation of a step is rare and the step's length is no frequent gap
    among the layers' short ones: the distance between every other synchronisation proposes it."""
    import random

    rng = random.Random(0)
    body = [f"op{rng.randrange(12)}" for _ in range(300)]  # layers: every op many times a step
    step = ["sync", *body, "sync"]  # synchronised before and after, as a timed loop is
    keys = ["init"] * 5 + ["sync", "load"] * 3 + step * 12
    steps = find_steps(keys, boundary=lambda k: k == "sync")
    assert steps.period == len(step) and steps.count >= 10
