"""The operator's settings, read once from the environment (the chart sets them from its values).

Each field documents its variable.  Settings that are maps (prices, GPU
product labels, node selectors) are JSON objects.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any


def _json(name: str, default: Any) -> Any:
    text = os.environ.get(name)
    if not text:
        return default
    try:
        return json.loads(text)
    except ValueError as e:
        raise ValueError(f"{name}: not valid JSON ({e}); set it to a JSON object") from None


@dataclass(frozen=True)
class Settings:
    """emulation_image: MAYA_EMULATION_IMAGE, the image with the interposer and the predictor (init container
    and predictor container of every emulation pod).
    max_emulation_pods: MAYA_MAX_EMULATION_PODS, emulation pods running at once per plan (default 4).
    emulation_node_selector: MAYA_EMULATION_NODE_SELECTOR, JSON node selector for emulation pods (CPU nodes).
    emulation_cpu / emulation_memory: MAYA_EMULATION_CPU (per rank, default "1") and MAYA_EMULATION_MEMORY
    (per pod, default "8Gi"): requests and limits unless the plan's spec.emulation says otherwise.
    emulation_timeout_seconds: MAYA_EMULATION_TIMEOUT_SECONDS, an emulation pod's active deadline (default 1800).
    prices: MAYA_PRICES, JSON {gpu: USD per GPU-hour} over the catalog's defaults (a plan's spec.prices wins).
    gpu_products: MAYA_GPU_PRODUCTS, JSON {gpu: nvidia.com/gpu.product value} over the catalog's labels.
    gpu_product_label: MAYA_GPU_PRODUCT_LABEL, the node label the webhook selects on (nvidia.com/gpu.product).
    poll_seconds: MAYA_POLL_SECONDS, how often a planning plan looks at its emulation pods (default 5).
    webhook_port / webhook_cert_dir: MAYA_WEBHOOK_PORT (9443) and MAYA_WEBHOOK_CERT_DIR (tls.crt, tls.key).
    metrics_port: MAYA_METRICS_PORT (8080), where /metrics is served.
    """

    emulation_image: str = "ghcr.io/maya-dev/maya-emulation:0.1.0"
    max_emulation_pods: int = 4
    emulation_node_selector: Mapping[str, str] = field(default_factory=dict)
    emulation_cpu: str = "1"
    emulation_memory: str = "8Gi"
    emulation_timeout_seconds: int = 1800
    prices: Mapping[str, float] = field(default_factory=dict)
    gpu_products: Mapping[str, str] = field(default_factory=dict)
    gpu_product_label: str = "nvidia.com/gpu.product"
    poll_seconds: float = 5.0
    webhook_port: int = 9443
    webhook_cert_dir: str = ""
    metrics_port: int = 8080

    @classmethod
    def from_env(cls) -> Settings:
        env = os.environ
        d = cls()
        return cls(
            emulation_image=env.get("MAYA_EMULATION_IMAGE", d.emulation_image),
            max_emulation_pods=int(env.get("MAYA_MAX_EMULATION_PODS", d.max_emulation_pods)),
            emulation_node_selector=_json("MAYA_EMULATION_NODE_SELECTOR", {}),
            emulation_cpu=env.get("MAYA_EMULATION_CPU", d.emulation_cpu),
            emulation_memory=env.get("MAYA_EMULATION_MEMORY", d.emulation_memory),
            emulation_timeout_seconds=int(env.get("MAYA_EMULATION_TIMEOUT_SECONDS", d.emulation_timeout_seconds)),
            prices=_json("MAYA_PRICES", {}),
            gpu_products=_json("MAYA_GPU_PRODUCTS", {}),
            gpu_product_label=env.get("MAYA_GPU_PRODUCT_LABEL", d.gpu_product_label),
            poll_seconds=float(env.get("MAYA_POLL_SECONDS", d.poll_seconds)),
            webhook_port=int(env.get("MAYA_WEBHOOK_PORT", d.webhook_port)),
            webhook_cert_dir=env.get("MAYA_WEBHOOK_CERT_DIR", d.webhook_cert_dir),
            metrics_port=int(env.get("MAYA_METRICS_PORT", d.metrics_port)),
        )

    def gpu_product(self, gpu: str) -> str:
        from maya import catalog

        return self.gpu_products.get(gpu) or catalog.lookup(gpu).gpu_product
