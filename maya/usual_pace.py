"""What the Python yardstick usually reads on this emulating machine, remembered from one question to the next.

``maya predict`` compares a question's emulations with each other (:func:`maya.predict.slow_phase`): one
whose steady steps read the yardstick (``maya/_hook/_maya_pace.py``) 1.25 times the quickest of the
question's ran in one of the emulating CPU's slow phases.  That cannot tell a question whose every emulation
ran in one: the phases last from seconds to minutes, and a host-bound question's three emulations of 20 s
each fall in one together (one answer in five 20-40% long, ``docs/emulating-machine.md``).  So each question
leaves its readings here, per machine, and the next compares its quickest reading with what this machine's
yardstick usually reads: a low quantile of the last day's readings, which the quick phases set (slow ones
read 1.4 to 1.8 times theirs) and which follows a machine that stays loaded once most readings are slow.

The store is a small JSON file under ``$MAYA_CACHE_DIR`` (default ``~/.cache/maya``), ``pace/<node>.json``;
a missing, unreadable or unwritable store leaves the comparison to the question alone.
"""

from __future__ import annotations

import json
import os
import socket
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

KEEP = 300  # readings remembered (a question leaves one per rank and emulation)
WITHIN_S = 24 * 3600  # older readings are forgotten: the machine, or its neighbours, may have changed
QUANTILE = 0.2  # of the remembered readings: the quick phases' level where up to four in five read slow
MIN_READINGS = 10  # fewer say too little of the machine to judge a question by


def this_node() -> str:
    """The machine an emulation ran on, so that only one machine's CPU readings are compared: in a pod its node
    (``MAYA_NODE_NAME``, from the downward API), elsewhere the host name."""
    return os.environ.get("MAYA_NODE_NAME") or socket.gethostname()


@dataclass(frozen=True)
class UsualPace:
    """The remembered readings (ns a chunk of the yardstick) of one machine, in the file ``path``."""

    path: Path

    @classmethod
    def of(cls, node: str) -> UsualPace:
        """The store of the machine ``node``."""
        root = os.environ.get("MAYA_CACHE_DIR")
        name = "".join(c if c.isalnum() or c in "-_." else "_" for c in node) or "node"
        return cls((Path(root) if root else Path.home() / ".cache" / "maya") / "pace" / f"{name}.json")

    @classmethod
    def here(cls) -> UsualPace:
        """The store of this machine."""
        return cls.of(this_node())

    def _readings(self, now: float) -> list[tuple[float, int, str]]:
        try:
            rows = [(float(at), int(ns), str(key)) for at, ns, key in json.loads(self.path.read_text())]
        except (OSError, ValueError, TypeError):
            return []
        return [row for row in rows if now - WITHIN_S <= row[0] <= now + 60 and row[1] > 0][-KEEP:]

    def reading(self, now: float | None = None) -> float | None:
        """What the yardstick usually reads here (ns); None while fewer than ``MIN_READINGS`` are remembered, or
        with ``MAYA_USUAL_PACE=0`` (answers that must not depend on the questions asked before: the tests)."""
        if os.environ.get("MAYA_USUAL_PACE") == "0":
            return None
        values = sorted(ns for _, ns, _ in self._readings(time.time() if now is None else now))
        return float(values[int(QUANTILE * (len(values) - 1))]) if len(values) >= MIN_READINGS else None

    def remember(self, readings: dict[str, int], now: float | None = None) -> None:
        """Adds a question's readings, by what was read (an emulation's folder and rank: one asked about again,
        for another GPU, is not counted twice; 0: not read); a store that cannot be written is left as it was."""
        at = time.time() if now is None else now
        rows = self._readings(at)
        known = {key for _, _, key in rows}
        rows += [(at, int(ns), key) for key, ns in readings.items() if ns > 0 and key not in known]
        written = None
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with tempfile.NamedTemporaryFile("w", dir=self.path.parent, suffix=".tmp", delete=False) as f:
                written = f.name
                json.dump([[round(a, 1), ns, key] for a, ns, key in rows[-KEEP:]], f)
            os.replace(written, self.path)  # whole, for a question answered beside this one
        except OSError:
            if written is not None:  # nothing half-written left beside the store
                Path(written).unlink(missing_ok=True)
