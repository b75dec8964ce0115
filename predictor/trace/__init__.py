"""Traces: the binary format, its reader and writer, typed record decoders, operations, and trace diff.

- :mod:`~maya.predictor.trace.format`: constants, record kinds and flags, the slot layout;
- :mod:`~maya.predictor.trace.reader` / :mod:`~maya.predictor.trace.writer`: a trace file to arrays and back;
- :mod:`~maya.predictor.trace.records`: what the packed words of each record kind mean;
- :mod:`~maya.predictor.trace.ops`: a trace's device operations without run-specific ids, and their measured times;
- :mod:`~maya.predictor.trace.align`: operation-by-operation alignment of two traces of the same script;
- :mod:`~maya.predictor.trace.diff`: ``maya trace diff``, the report on such an alignment.

The names below are the reading API (``from maya.predictor.trace import Kind, read_trace``).
"""

from maya.predictor.trace.format import HEADER_SIZE, SLOT, SLOT_DTYPE, Flag, Kind
from maya.predictor.trace.reader import Trace, TraceError, decode, name_of, read_trace
from maya.predictor.trace.writer import TraceWriter, write_trace

__all__ = ["HEADER_SIZE", "SLOT", "SLOT_DTYPE", "Flag", "Kind", "Trace", "TraceError", "TraceWriter", "decode",
           "name_of", "read_trace", "write_trace"]
