"""cuDNN RNN emulation (emulation-image/src/cudnn_rnn.c; docs/dnn.md).

Covers, with one small torch script run under the interposer (shared by the tests):
- ``nn.LSTM`` (2 layers, bidirectional, inter-layer dropout), ``nn.GRU`` and
  ``nn.RNN`` training steps run to completion: torch builds its parameter views
  from the addresses ``cudnnGetRNNWeightParams`` returns and checks their
  layout itself (``flatten_parameters``, the forward's weight-buffer check and
  the backward pass would fail on a gap, an overlap or a wrong size);
- the weight space is exactly the parameter count torch expects (the flat
  buffer's size is checked in the script);
- each cell type records ``rnn_fwd``, ``rnn_bwd_data`` and ``rnn_bwd_weights``
  DNN records with mode, layers, directions, input, hidden, sequence length,
  batch, tokens, the reserve-space size and the dropout probability, and
  asynchronous on the handle's stream;
- the reserve space follows the documented formula (LSTM: 5 hidden vectors per
  pseudo-layer plus each non-last layer's output, per time step and batch row);
- the temporary-space sizes are reported approximated, no cuDNN call is
  unsupported, and the summary reports a peak memory.
"""

from __future__ import annotations

import pytest
from emulated import requires_library, run_emulated
from test_dnn import as_double, dnn_records, unsupported

from maya.predictor.trace import Flag, read_trace

pytestmark = pytest.mark.emulation

SCRIPT = """
import torch, torch.nn as nn
S, B, I, H = 7, 3, 10, 16
for cls, kw in ((nn.LSTM, dict(num_layers=2, bidirectional=True, dropout=0.25)), (nn.GRU, {}), (nn.RNN, {})):
    m = cls(I, H, **kw).cuda()
    x = torch.randn(S, B, I, device="cuda", requires_grad=True)
    out, _ = m(x)
    out.sum().backward()
    flat = m._flat_weights[0].untyped_storage().nbytes() // 4
    assert flat == sum(p.numel() for p in m.parameters()), (flat, sum(p.numel() for p in m.parameters()))
    assert all(p.grad is not None for p in m.parameters())
    assert x.grad is not None
torch.cuda.synchronize()
"""

LSTM, GRU, RNN_TANH = 2, 3, 1
PARAMS = ("mode", "algo", "layers", "dirs", "input", "hidden", "proj", "seq", "batch", "tokens", "bias", "math",
          "reserve", "dropout")


@pytest.fixture(scope="module")
def emulated(tmp_path_factory):
    run = run_emulated(SCRIPT, tmp_path_factory.mktemp("rnn"))
    assert run.returncode == 0, run.output
    return run


@requires_library
def test_rnn_training_runs_with_cudnn_layout(emulated):
    trace = read_trace(emulated.trace_path())
    assert not [u for u in unsupported(trace) if u.startswith("cudnn")]
    assert emulated.rank0["peak_allocated_bytes"] > 0
    approximated = emulated.rank0["approximated"]
    assert any(k.startswith("cudnnGetRNNTempSpaceSizes") for k in approximated), approximated


@requires_library
def test_rnn_records_carry_the_shape(emulated):
    recs = [r for r in dnn_records(read_trace(emulated.trace_path())) if r["op"].startswith("rnn_")]
    by_mode: dict[int, list[dict]] = {}
    for r in recs:
        by_mode.setdefault(r["params"][0], []).append(r)
    assert set(by_mode) == {LSTM, GRU, RNN_TANH}
    for mode, rs in by_mode.items():
        assert [r["op"] for r in rs] == ["rnn_fwd", "rnn_bwd_data", "rnn_bwd_weights"]
        for r in rs:
            p = dict(zip(PARAMS, r["params"], strict=True))
            assert (p["input"], p["hidden"], p["seq"], p["batch"], p["tokens"]) == (10, 16, 7, 3, 21)
            assert r["flags"] & Flag.ASYNC and r["dtype"] == 0
            lstm = mode == LSTM
            assert (p["layers"], p["dirs"]) == ((2, 2) if lstm else (1, 1))
            assert as_double(p["dropout"]) == (0.25 if lstm else 0.0)
            # Reserve: per step and row, cell vectors per pseudo-layer (LSTM 5, GRU 6, RNN 1)
            # plus the outputs of every layer but the last, in fp32.
            cell = {LSTM: 5, GRU: 6, RNN_TANH: 1}[mode]
            rows = 7 * 3
            expected = rows * (p["layers"] * p["dirs"] * cell * 16 + (p["layers"] - 1) * p["dirs"] * 16) * 4
            assert p["reserve"] == expected, (mode, p["reserve"], expected)
