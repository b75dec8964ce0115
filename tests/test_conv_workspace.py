"""A convolution's emulated workspace is what cuDNN 9.19 asked on an H200 (emulation-image/src/cudnn_backend.c).

The sm90 engines autotuning picks keep channels-last copies of the tensors they
cannot read in place, channels padded to 16 bytes: every tensor of an NCHW
convolution, the short-channelled ones of a channels-last one.  Those copies
set the peak of an NCHW network (the held-out diffusion UNet peaks inside its
last convolution).  ``benchmarks/campaigns/conv_workspace.py`` measured the
blocks each forward and backward allocated and freed on an H200
(``benchmarks/data/conv_workspace/``); run here under emulation, the bf16
convolutions whose copies come to 4 MB or more ask what the GPU asked, but
one: 12 -> 24 channels on 32 x 32 in NCHW, for whose forward the GPU's
autotuning picked an engine that copies nothing.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from emulated import REPO, requires_library, run_emulated

pytestmark = pytest.mark.emulation

MEASURED = REPO / "benchmarks/data/conv_workspace/H200-SXM-141GB.json"
SCRIPT = REPO / "benchmarks/campaigns/conv_workspace.py"
NO_COPIES = {("nchw", (64, 12, 24, 3, 32, 1))}  # measured: no workspace at all


def copies(shape: dict[str, int], layout: str) -> int:
    """Bytes of the bf16 copies the engine keeps (the rule the interposer follows)."""
    n, c, k, r, size, stride = (shape[x] for x in ("n", "c", "k", "r", "size", "stride"))
    cp, kp, out = -(-c // 8) * 8, -(-k // 8) * 8, (size + 2 * (r // 2) - r) // stride + 1
    x, y, w = n * cp * size * size * 2, n * kp * out * out * 2, kp * cp * r * r * 2
    if layout == "nchw":
        return x + y + w if r > 1 and c >= 4 else 0
    short_c, short_k = c % 8 != 0, k % 8 != 0
    return (x if short_c else 0) + (y if short_k else 0) + (w if short_c or short_k else 0)


@requires_library
def test_large_convolutions_ask_the_measured_workspace(tmp_path: Path) -> None:
    out = tmp_path / "emulated.json"
    r = run_emulated(f"import runpy, sys\nsys.argv = ['conv_workspace.py', '--out', {str(out)!r}, '--dtype', 'bf16']\n"
                     f"runpy.run_path({str(SCRIPT)!r}, run_name='__main__')\n", tmp_path, gpu="H200-SXM-141GB")
    assert r.returncode == 0, r.output
    emulated = {(e["layout"], tuple(e["shape"].values())): e for e in json.loads(out.read_text())["rows"]}
    checked = 0
    for m in json.loads(MEASURED.read_text())["rows"]:
        if m["dtype"] != "bf16" or copies(m["shape"], m["layout"]) < 4 << 20:
            continue
        if (m["layout"], tuple(m["shape"].values())) in NO_COPIES:
            assert not m["forward"]
            continue
        e = emulated[(m["layout"], tuple(m["shape"].values()))]
        where = f"{m['layout']} {m['shape']}"
        # forward: one block, within 200 bytes (cuDNN's own 16-147 bytes beside the copies)
        assert len(e["forward"]) == 1 and abs(e["forward"][0] - m["forward"][0]) <= 200, (where, e, m)
        # backward: the data gradient's block is the forward's copies again, as measured
        assert any(abs(b - min(m["backward"])) <= 200 for b in e["backward"]), (where, e, m)
        checked += 1
    assert checked >= 8  # NCHW 128->3, 128->128, 256->256, 64->4, 4->64; channels-last short channels
