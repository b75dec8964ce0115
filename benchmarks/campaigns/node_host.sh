#!/usr/bin/env bash
# The host of a machine of several GPUs, which runs the jobs of several ranks (docs/host-model.md):
# each GPU's host cost per CUDA call (server_call_cost.sh, three runs a GPU) and the machine's CPU
# speed on the examples' emulated host work (benchmarks/host_yardsticks.py read, cut after
# YARDSTICK_S seconds; it saves after each configuration).  Runs on the GPU machine:
#
#   OUT=DIR GPU=H100-SXM-80GB bash benchmarks/campaigns/node_host.sh [YARDSTICK_S]
set -u
cd "$(dirname "$0")/../.."
make -s -C emulation-image PYTHON=python3 >"$OUT/build.log" 2>&1 || { tail -20 "$OUT/build.log"; exit 1; }
# maya.predictor is predictor/ through the package-dir mapping of pyproject.toml: an editable install
# (the GPU machines run Python 3.12).
python3 -m pip install -q --no-deps --no-build-isolation --no-index --ignore-requires-python -e . >"$OUT/install.log" 2>&1 || { tail -5 "$OUT/install.log"; exit 1; }
nvidia-smi --query-gpu=index,name,uuid --format=csv,noheader >"$OUT/gpus.txt"
for g in $(nvidia-smi --query-gpu=index --format=csv,noheader); do
  CUDA_VISIBLE_DEVICES=$g PYTHON=python3 bash benchmarks/campaigns/server_call_cost.sh "$OUT/gpu$g" >/dev/null 2>"$OUT/gpu$g.err" \
    || tail -5 "$OUT/gpu$g.err"
done
timeout "${1:-300}" python3 -m benchmarks.host_yardsticks read --out "$OUT/yardsticks.json" --emulations 2 \
  --gpu "${GPU:-H100-SXM-80GB}" >"$OUT/yardsticks.log" 2>&1
echo "yardsticks rc $?"; tail -3 "$OUT/yardsticks.log"
