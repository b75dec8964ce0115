#!/usr/bin/env bash
# The GPU server's host cost per CUDA call, for the replay's host model
# (predictor/replay/host.py): builds benchmarks/campaigns/server_call_cost.cu (kernel launch,
# memset, copy, cuBLAS GEMM) and benchmarks/campaigns/server_dnn_cost.c (a cuDNN
# convolution as PyTorch calls it) against the machine's own CUDA and torch
# wheels, runs each three times and writes one JSON line per run to
# OUT/call_cost.jsonl, with the CPU it ran on.  Runs on the GPU machine:
#
#   bash benchmarks/campaigns/server_call_cost.sh "$OUT"
set -euo pipefail
out=${1:?usage: server_call_cost.sh OUT_DIR}
python=${PYTHON:-python3}
mkdir -p "$out"
nv=$("$python" -c "import nvidia, os; print(os.path.dirname(nvidia.__path__[0]) + '/nvidia')")
cudart=$(dirname "$(find "$nv" /usr/local/cuda/lib64 -name 'libcudart.so.13*' -print -quit)")
build=$(mktemp -d)
nvcc -O2 -arch=sm_90 -o "$build/call_cost" benchmarks/campaigns/server_call_cost.cu -lcublas
gcc -O2 -o "$build/dnn_cost" benchmarks/campaigns/server_dnn_cost.c -I"$nv/cudnn/include" -I/usr/local/cuda/include \
    -L"$nv/cudnn/lib" -L"$cudart" -l:libcudnn.so.9 -l:libcudart.so.13 -Wl,-rpath,"$nv/cudnn/lib:$cudart"
cpu=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')
for run in 0 1 2; do
    calls=$("$build/call_cost")
    dnn=$("$build/dnn_cost")
    echo "{\"run\": $run, \"cpu\": \"$cpu\", \"cpus\": $(nproc), \"calls\": $calls, \"dnn\": $dnn}" | tee -a "$out/call_cost.jsonl"
done
