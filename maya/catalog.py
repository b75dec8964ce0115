"""The virtual GPU catalog: ``maya/gpus.json``, shared with the interposer.

The interposer does not read JSON: it receives one entry rendered as the
``MAYA_GPU_SPEC`` string (``key=value;...``, parsed by
``emulation-image/src/config.c``).  The predictor reads the throughput fields.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

CATALOG_PATH = Path(__file__).with_name("gpus.json")

# Keys of MAYA_GPU_SPEC, in the order the interposer documents them.
SPEC_KEYS = (
    "marketing", "cc", "sms", "mem", "reserved", "clock_khz", "mem_clock_khz",
    "bus_width", "l2", "smem_sm", "smem_block", "smem_optin", "regs_sm",
    "regs_block", "threads_sm", "blocks_sm", "pci_id",
)
DTYPES = ("fp64", "fp32", "tf32", "bf16", "fp16", "fp8")


class UnknownGPU(KeyError):
    """The GPU name is not in the catalog; ``valid`` lists the names that are."""

    def __init__(self, name: str, valid: list[str]) -> None:
        super().__init__(name)
        self.name = name
        self.valid = valid

    def __str__(self) -> str:
        return f"unknown GPU {self.name!r}; valid names: {', '.join(self.valid)}"


@dataclass(frozen=True)
class GPU:
    """One catalog entry. ``fields`` holds the raw JSON object."""

    name: str
    fields: dict[str, Any]

    @property
    def marketing(self) -> str:
        return str(self.fields["marketing"])

    @property
    def memory_bytes(self) -> int:
        return int(self.fields["mem"])

    @property
    def reserved_bytes(self) -> int:
        return int(self.fields["reserved"])

    @property
    def sm_count(self) -> int:
        return int(self.fields["sms"])

    @property
    def compute_capability(self) -> tuple[int, int]:
        major, minor = str(self.fields["cc"]).split(".")
        return int(major), int(minor)

    @property
    def gpus_per_node(self) -> int:
        return int(self.fields.get("gpus_per_node", 8))

    @property
    def mem_bw_bytes_per_s(self) -> float:
        return float(self.fields["mem_bw_gbps"]) * 1e9

    @property
    def nvlink_bytes_per_s(self) -> float:
        return float(self.fields["nvlink_gbps"]) * 1e9

    @property
    def price_usd_per_hour(self) -> float:
        """The default on-demand price of one GPU-hour (a plan may override it)."""
        return float(self.fields["price_usd_per_hour"])

    @property
    def gpu_product(self) -> str:
        """The ``nvidia.com/gpu.product`` node label of this model (GPU Feature Discovery)."""
        return str(self.fields["gpu_product"])

    def peak_flops(self, dtype: str) -> float:
        """Dense peak in FLOP/s for ``dtype`` (one of ``DTYPES``); 0 if unsupported."""
        return float(self.fields["peak_tflops"].get(dtype, 0.0)) * 1e12

    def spec_string(self) -> str:
        """The ``MAYA_GPU_SPEC`` value the interposer parses."""
        parts = [f"name={self.name}"]
        for key in SPEC_KEYS:
            value = self.fields[key]
            if ";" in str(value) or "=" in str(value):
                raise ValueError(f"{self.name}.{key} may not contain ';' or '='")
            parts.append(f"{key}={value}")
        return ";".join(parts)


@lru_cache(maxsize=4)
def _load(path: Path) -> dict[str, dict[str, Any]]:
    with open(path, encoding="utf-8") as f:
        data = json.load(f)
    gpus: dict[str, dict[str, Any]] = data["gpus"]
    for name, fields in gpus.items():
        missing = [k for k in SPEC_KEYS if k not in fields]
        if missing:
            raise ValueError(f"{path}: {name} lacks {', '.join(missing)}")
    return gpus


def names(path: Path = CATALOG_PATH) -> list[str]:
    """Catalog names in file order."""
    return list(_load(path))


def lookup(name: str, path: Path = CATALOG_PATH) -> GPU:
    """The entry called ``name`` (case-insensitive); raises :class:`UnknownGPU`."""
    gpus = _load(path)
    for key, fields in gpus.items():
        if key.lower() == name.strip().lower():
            return GPU(key, fields)
    raise UnknownGPU(name, list(gpus))


def all_gpus(path: Path = CATALOG_PATH) -> list[GPU]:
    return [GPU(k, v) for k, v in _load(path).items()]


def spec_string(name: str) -> str:
    """Shortcut: the ``MAYA_GPU_SPEC`` value of catalog entry ``name``."""
    return lookup(name).spec_string()
