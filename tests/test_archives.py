"""Campaign archives (benchmarks/archives.py): one per job, split into parts past PART_BYTES.

Covers: a folder packed into parts and extracted back byte for byte; a later
campaign's archive of a job replaces an earlier one's; the prefix filter.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from benchmarks import archives


def job(root: Path, name: str, payload: bytes) -> Path:
    folder = root / name
    folder.mkdir(parents=True)
    (folder / "rank0.mayatrace").write_bytes(payload)
    return folder


def test_parts_round_trip_and_later_archives_win(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(archives, "PART_BYTES", 4096)
    big = os.urandom(20000)  # incompressible: several parts
    campaign = tmp_path / "campaign"
    campaign.mkdir()
    parts = archives.pack(job(tmp_path / "a", "sweep-memory", big), campaign / "sweeps-1-sweep-memory.tar.xz")
    assert len(parts) > 1 and all(p.stat().st_size <= 4096 for p in parts)
    archives.pack(job(tmp_path / "b", "sweep-dnn", b"old"), campaign / "sweeps-1-sweep-dnn.tar.xz")
    archives.pack(job(tmp_path / "c", "sweep-dnn", b"new"), campaign / "sweeps-2-sweep-dnn.tar.xz")
    archives.pack(job(tmp_path / "d", "example-gpt", b"gpt"), campaign / "example-gpt.tar.xz")
    out = tmp_path / "out"
    archives.extract_all(campaign, out)
    assert (out / "sweep-memory" / "rank0.mayatrace").read_bytes() == big
    assert (out / "sweep-dnn" / "rank0.mayatrace").read_bytes() == b"new"
    only = tmp_path / "only"
    archives.extract_all(campaign, only, ("example",))
    assert sorted(p.name for p in only.iterdir()) == ["example-gpt"]
