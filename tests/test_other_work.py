"""What maya emulate says about other work on its CPUs (maya.other_work): the busy time of the
CPUs it may use, less its command's own CPU time, as a share of those CPUs' time."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from maya import other_work
from maya.other_work import Sample


def _stat(path: Path, per_cpu: dict[int, tuple[int, ...]]) -> Path:
    lines = ["cpu  0 0 0 0 0 0 0 0 0 0"]
    lines += [f"cpu{c} " + " ".join(str(v) for v in fields) for c, fields in per_cpu.items()]
    path.write_text("\n".join(lines) + "\n")
    return path


def test_busy_time_counts_user_system_irq_and_steal_of_the_usable_cpus_only(tmp_path: Path) -> None:
    tick = os.sysconf("SC_CLK_TCK")
    mine = min(os.sched_getaffinity(0))
    other = max(os.sched_getaffinity(0)) + 1  # a CPU this process may not use
    #            user nice system idle iowait irq softirq steal
    stat = _stat(tmp_path / "stat", {mine: (100, 10, 50, 900, 40, 5, 5, 30), other: (999, 0, 0, 0, 0, 0, 0, 0)})
    s = other_work.sample(stat)
    assert s is not None
    assert s.busy_s == pytest.approx((100 + 10 + 50 + 5 + 5 + 30) / tick)  # idle and iowait are not busy
    assert other_work.sample(tmp_path / "missing") is None


def test_share_is_the_others_busy_time_over_the_cpus_time() -> None:
    before = Sample(wall_s=0.0, busy_s=100.0, children_s=10.0, cpus=2)
    after = Sample(wall_s=10.0, busy_s=115.0, children_s=20.0, cpus=2)  # 15 s busy, 10 s of them ours
    assert other_work.share(before, after) == pytest.approx(5.0 / 20.0)
    assert other_work.share(before, Sample(0.2, 101.0, 10.0, 2)) is None  # too short to say
    assert other_work.share(None, after) is None
    idle = Sample(wall_s=10.0, busy_s=110.0, children_s=20.0, cpus=2)
    assert other_work.share(before, idle) == 0.0


def test_a_notable_share_gets_a_line_that_says_what_to_do() -> None:
    assert other_work.warning(None) is None
    assert other_work.warning(0.05) is None
    line = other_work.warning(0.5)
    assert line is not None and "50%" in line and "idle machine" in line


def test_ranks_get_the_cpus_other_work_keeps_busy_last(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    tick = os.sysconf("SC_CLK_TCK")
    stat = tmp_path / "stat"
    monkeypatch.setattr(other_work, "_usable_cpus", lambda: {0, 1, 2, 5})

    def order(busy_ticks: dict[int, int]) -> list[int]:
        """The order over a window of a second in which each CPU was busy so many ticks."""
        _stat(stat, {c: (1000, 0, 0, 0, 0, 0, 0, 0) for c in (0, 1, 2, 5)})
        after = {c: (1000 + busy_ticks.get(c, 0), 0, 0, 0, 0, 0, 0, 0) for c in (0, 1, 2, 5)}
        monkeypatch.setattr(other_work.time, "sleep", lambda _s: _stat(stat, after))
        return other_work.quietest_cpus(window_s=1.0, path=stat)

    assert order({}) == [0, 1, 2, 5]  # an idle machine: the CPUs' own order
    assert order({0: tick // 10, 1: tick // 20}) == [0, 1, 2, 5]  # a little work here and there: the same
    assert order({0: tick}) == [1, 2, 5, 0]  # a CPU-bound process on the first: it goes last
    assert order({0: tick, 2: 3 * tick // 4}) == [1, 5, 2, 0]  # the busiest last
    monkeypatch.setattr(other_work.time, "sleep", lambda _s: None)
    assert other_work.quietest_cpus(window_s=1.0, path=tmp_path / "missing") == [0, 1, 2, 5]  # not readable
