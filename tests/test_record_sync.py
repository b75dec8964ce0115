"""Recorded synchronisations and events hold the replay as they held the GPU server.

Record mode numbers an operation's stream as CUPTI's activity records do (the
legacy default stream is 7 there, a stream of the job's own another id), and
must number a synchronisation's stream the same way, from its handle, and
record the events that order one stream after another. A synchronisation
recorded as stream 0 waited for nothing in the replay: the host of
`sparse_recsys` (which synchronises the default stream at every sort and
unique of its sparse gradient) ran ahead of its device, and its replay of
measured kernel times came to 35.0 ms a step against 43-46 ms recorded.
Without the events, cuDNN's RNN kernels on its own streams overlapped freely:
`lstm_lm` replayed at 27.8 ms against 35.3 ms recorded. The traces here were
recorded on an H100 with both (`emulation-image/src/record/record.c`,
``place_locked``).
"""

from __future__ import annotations

import statistics
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from benchmarks.archives import extract_all
from benchmarks.held_out.campaign import result_lines
from maya.predict import predict_folder, prepare
from maya.predictor.replay.host import host_model
from maya.predictor.trace import Kind, read_trace

ROOT = Path(__file__).resolve().parent.parent
SYNCS = ROOT / "tests" / "data" / "record_sync"
RECORDS = ROOT / "benchmarks" / "data" / "held_out" / "records" / "H100-SXM-80GB-e"


def test_a_recorded_stream_sync_names_the_stream_its_work_ran_on() -> None:
    records = read_trace(SYNCS / "rank0.mayatrace").records
    kinds, streams = records["kind"], records["stream"]
    syncs = np.flatnonzero(kinds == Kind.STREAM_SYNC)
    assert len(syncs) == 4
    for i in syncs.tolist():
        work = [j for j in range(i) if kinds[j] in (Kind.BLAS, Kind.KERNEL)]
        assert int(streams[i]) == int(streams[work[-1]]) != 0
    assert len({int(streams[i]) for i in syncs}) == 2  # the default stream and the job's own


def test_the_replay_holds_the_host_at_a_stream_sync_until_its_work_is_done() -> None:
    job = prepare(SYNCS, "H100-SXM-80GB", oracle=True)
    result = job.replay(host_model("H100-SXM-80GB").as_recorded())[0]
    kinds = job.traces[0].records["kind"]
    for i in np.flatnonzero(kinds == Kind.STREAM_SYNC).tolist():
        before = [j for j in range(i) if kinds[j] == Kind.BLAS]
        assert result.released[i] >= result.end[before[-1]] > result.issue[i]


def test_a_recorded_event_orders_the_waiting_stream_after_the_recording_one() -> None:
    job = prepare(SYNCS, "H100-SXM-80GB", oracle=True)
    result = job.replay(host_model("H100-SXM-80GB").as_recorded())[0]
    records = job.traces[0].records
    kinds, streams = records["kind"], records["stream"]
    (recorded,) = np.flatnonzero(kinds == Kind.EVENT_RECORD)[:1].tolist()
    (wait,) = np.flatnonzero(kinds == Kind.STREAM_WAIT_EVENT).tolist()
    assert records["a"][recorded][:2].tolist() == records["a"][wait][:2].tolist()  # event 1, its first record
    assert streams[recorded] != streams[wait]
    before = [j for j in range(recorded) if kinds[j] == Kind.BLAS and streams[j] == streams[recorded]]
    after = next(j for j in range(wait, len(kinds)) if kinds[j] == Kind.BLAS)
    assert streams[after] == streams[wait]
    assert result.start[after] >= result.end[before[-1]]


@pytest.mark.parametrize(("workload", "within"), [("sparse_recsys", 0.03), ("lstm_lm", 0.08)])
def test_a_recorded_job_replays_at_its_recorded_pace(tmp_path: Path, workload: str, within: float) -> None:
    """With its measured kernel times, a record replays within ``within`` of the steps it recorded
    (``lstm_lm``: 36.2 ms against 38.8; what cuDNN's RNN does between its kernels is not all recorded)."""
    extract_all(RECORDS, tmp_path, (workload,))
    folder = tmp_path / workload
    recorded = result_lines((folder / "stdout.txt").read_text())[0]["step_times_s"]
    predicted = predict_folder(folder, "H100-SXM-80GB", oracle=True).step_time_s
    assert abs(predicted / statistics.median(recorded) - 1) < within


def test_a_recorded_runs_prediction_says_its_trace_holds_no_memory() -> None:
    """Record mode keeps no allocations: 'maya predict --oracle' says so instead of a peak of 0 GiB that fits."""
    out = subprocess.run([sys.executable, "-m", "maya.cli", "predict", "--gpu", "H100-SXM-80GB", "--from", str(SYNCS),
                          "--oracle"], capture_output=True, text=True, timeout=300, check=True).stdout
    assert "rank 0 peak memory: not in its trace" in out and "0.00 GiB" not in out
