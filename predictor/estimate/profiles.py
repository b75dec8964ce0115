"""Profile tables: measured device times of operations, keyed by what emulation sees.

A profile row joins one script run twice: under emulation (the features:
only the emulated trace holds DNN parameters and kernel names) and recorded
on a real GPU (the durations, from its DEVICE_TIME records).  The two traces
are aligned operation by operation (``align.py``) and the repeats of each
distinct operation are reduced to a median, so the estimators are trained
on exactly what they will be asked about.

Tables are committed as data, ``predictor/profiles/<GPU catalog name>/<part>.csv.gz``:
a first line ``# stamp {JSON}`` (gpu, driver, cuda, cublas, cudnn, nccl,
torch, date, command: where the numbers come from), then a CSV header and
one row per distinct operation and source (``COLUMNS``).
"""

from __future__ import annotations

import csv
import gzip
import io
import json
import logging
import statistics
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from maya.predictor.trace.align import align_traces
from maya.predictor.trace.ops import OP_COLUMNS, Op, measured
from maya.predictor.trace.reader import Trace

log = logging.getLogger(__name__)

PROFILES_DIR = Path(__file__).parents[1] / "profiles"
COLUMNS = (*OP_COLUMNS, "dur_ns", "busy_ns", "n", "spread", "source")
STAMP_PREFIX = "# stamp "


@dataclass(frozen=True)
class ProfileRow:
    """One distinct operation as measured: medians over its ``n`` repeats.

    ``dur_ns``: median span (first kernel start to last kernel end);
    ``busy_ns``: median summed kernel time; ``spread``: (max - min) / median
    of the spans; ``source``: the sweep part or example it comes from
    (e.g. ``gemm``, ``example:gpt``, ``held-out:gpt-d128``)."""

    op: Op
    dur_ns: int
    busy_ns: int
    n: int
    spread: float
    source: str

    def to_row(self) -> dict[str, str]:
        row = self.op.to_row()
        row.update(
            dur_ns=str(self.dur_ns), busy_ns=str(self.busy_ns), n=str(self.n), spread=f"{self.spread:.4g}",
            source=self.source,
        )
        return row

    @classmethod
    def from_row(cls, row: dict[str, str]) -> ProfileRow:
        return cls(
            Op.from_row(row), int(row["dur_ns"]), int(row["busy_ns"]), int(row["n"]), float(row["spread"]),
            row["source"],
        )


@dataclass(frozen=True)
class Join:
    """Emulated operations with the recorded times of their counterparts.

    ``samples``: (emulated op, span ns, busy ns), one per matched and timed
    operation.  The rest says what could not be used: recorded operations
    with no emulated counterpart (``unmatched``), matched ones that caused no
    measured device work (``untimed``), and measured busy time that belongs
    to no recorded device operation, e.g. a CUDA graph launch
    (``unattributed_ns``)."""

    samples: list[tuple[Op, int, int]]
    recorded_ops: int
    unmatched: int
    untimed: int
    unattributed_ns: int


def join(emulated: Trace, recorded: Trace) -> Join:
    """Align the two traces and attach the recorded times to the emulated operations."""
    times = measured(recorded)
    samples = []
    recorded_ops = unmatched = untimed = 0
    attributed: set[int] = set()
    for p in align_traces(emulated, recorded):
        if p.b is None:
            continue
        recorded_ops += 1
        attributed.add(p.b)
        if p.op_a is None:
            unmatched += 1
        elif p.b not in times:
            untimed += 1
        else:
            m = times[p.b]
            samples.append((p.op_a, m.span_ns, m.busy_ns))
    unattributed = sum(m.busy_ns for i, m in times.items() if i not in attributed)
    return Join(samples, recorded_ops, unmatched, untimed, unattributed)


def aggregate(samples: Iterable[tuple[Op, int, int]], source: str) -> list[ProfileRow]:
    """One row per distinct operation (by signature), in order of first appearance."""
    groups: dict[tuple[Any, ...], tuple[Op, list[int], list[int]]] = {}
    for op, span, busy in samples:
        group = groups.setdefault(op.signature(), (op, [], []))
        group[1].append(span)
        group[2].append(busy)
    rows = []
    for op, spans, busys in groups.values():
        median = statistics.median(spans)
        spread = (max(spans) - min(spans)) / median if median > 0 else 0.0
        rows.append(ProfileRow(op, round(median), round(statistics.median(busys)), len(spans), spread, source))
    return rows


def rows_from_pair(emulated: Trace, recorded: Trace, source: str) -> tuple[list[ProfileRow], int]:
    """Profile rows of one script run emulated and recorded, and how many
    recorded operations had no emulated counterpart (they are left out)."""
    j = join(emulated, recorded)
    if j.unmatched or j.untimed or j.unattributed_ns:
        log.info(
            "%s: %d of %d recorded operations unmatched, %d matched without device time, "
            "%.3f ms measured outside device operations",
            source, j.unmatched, j.recorded_ops, j.untimed, j.unattributed_ns / 1e6,
        )
    return aggregate(j.samples, source), j.unmatched


def write_table(path: str | Path, rows: Iterable[ProfileRow], stamp: dict[str, Any]) -> None:
    """Write a gzip CSV table (byte-for-byte reproducible: no time in the gzip header)."""
    with open(path, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", mtime=0) as gz:
        text = io.TextIOWrapper(gz, encoding="utf-8", newline="")
        text.write(STAMP_PREFIX + json.dumps(stamp, sort_keys=True) + "\n")
        writer = csv.DictWriter(text, fieldnames=COLUMNS, lineterminator="\n")
        writer.writeheader()
        writer.writerows(r.to_row() for r in rows)
        text.flush()
        text.detach()


def read_table(path: str | Path) -> tuple[dict[str, Any], list[ProfileRow]]:
    """(stamp, rows) of a table written by :func:`write_table`; ValueError if it is not one."""
    with gzip.open(path, "rt", encoding="utf-8", newline="") as f:
        first = f.readline()
        if not first.startswith(STAMP_PREFIX):
            raise ValueError(f"{path}: not a profile table (no '{STAMP_PREFIX.strip()}' line)")
        stamp = json.loads(first[len(STAMP_PREFIX) :])
        reader = csv.DictReader(f)
        missing = set(COLUMNS) - set(reader.fieldnames or ())
        if missing:
            raise ValueError(f"{path}: columns {sorted(missing)} missing")
        return stamp, [ProfileRow.from_row(row) for row in reader]


def table_paths(gpu: str, root: str | Path = PROFILES_DIR) -> list[Path]:
    """The profile tables of ``gpu``: ``root/<gpu>/*.csv.gz``, in name order."""
    return sorted((Path(root) / gpu).glob("*.csv.gz"))


def load_profiles(gpu: str, root: str | Path = PROFILES_DIR) -> list[ProfileRow]:
    """Every row of the tables of ``gpu`` (none when the GPU has no tables)."""
    rows: list[ProfileRow] = []
    for path in table_paths(gpu, root):
        rows += read_table(path)[1]
    return rows
