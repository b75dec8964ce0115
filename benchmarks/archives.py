"""Campaign archives small enough to commit: one .tar.xz per job, in numbered parts past PART_BYTES.

A recorded sweep trace compresses to a few MB, some to more than the 5 MiB a
committed file may take, so an archive larger than ``PART_BYTES`` is split
into ``NAME.tar.xz.00``, ``.01``... and joined again when read.  Standard
library only: the GPU machine packs with its own Python.
"""

from __future__ import annotations

import io
import re
import tarfile
from pathlib import Path

PART_BYTES = 4 << 20
_PART = re.compile(r"^(.*\.tar\.xz)\.(\d\d)$")


def pack(folder: Path, out: Path) -> list[Path]:
    """``folder`` as ``out`` (a .tar.xz path), split into parts when it is larger than PART_BYTES."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:xz", preset=9) as tar:
        tar.add(folder, arcname=folder.name)
    data = buf.getvalue()
    if len(data) <= PART_BYTES:
        out.write_bytes(data)
        return [out]
    parts = []
    for i in range(0, len(data), PART_BYTES):
        part = out.with_name(f"{out.name}.{i // PART_BYTES:02d}")
        part.write_bytes(data[i:i + PART_BYTES])
        parts.append(part)
    return parts


def extract_all(campaign: Path, dest: Path, prefixes: tuple[str, ...] = ("",)) -> None:
    """Extract the archives of ``campaign`` whose names start with one of ``prefixes`` (whole or in
    parts) into ``dest``, in name order, so that a later campaign's folder of a job replaces an
    earlier one's."""
    archives: dict[str, list[Path]] = {}
    for p in campaign.iterdir():
        if not p.name.startswith(prefixes):
            continue
        m = _PART.match(p.name)
        if m:
            archives.setdefault(m.group(1), []).append(p)
        elif p.name.endswith(".tar.xz"):
            archives.setdefault(p.name, []).append(p)
    for name in sorted(archives):
        data = b"".join(p.read_bytes() for p in sorted(archives[name]))
        with tarfile.open(fileobj=io.BytesIO(data), mode="r:xz") as tar:
            tar.extractall(dest, filter="data")
