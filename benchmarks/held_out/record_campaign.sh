#!/usr/bin/env bash
# Records held-out workloads on a GPU machine, for diagnosis only (never fitted on):
#   OUT=DIR bash benchmarks/held_out/record_campaign.sh WORKLOAD...
# For each workload of benchmarks/held_out/suite.py (its suite arguments, --steps 8): one plain run,
# then `maya record` of the same command; each record is packed as $OUT/NAME.tar.xz
# (benchmarks/archives.py), with the plain run's output inside (plain.txt).  A workload of several
# GPUs runs under torchrun, one process per GPU, with NVLink multicast off.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
cd "$(dirname "$0")/../.."
make -s -C emulation-image PYTHON=python3 build/libmaya_record.so >"$OUT/build.log" 2>&1 || { tail -20 "$OUT/build.log"; exit 1; }
for w in "$@"; do
  args=$(python3 -c "
import sys; sys.path.insert(0, '.')
from benchmarks.held_out.suite import BY_NAME
w = BY_NAME['$w']; a = list(w.argv)
i = a.index('--steps'); a[i + 1] = '8'
run = ['-m', 'torch.distributed.run', '--standalone', f'--nproc-per-node={w.gpus}'] if w.gpus > 1 else []
print(' '.join(run + [w.script] + a))")
  dir=/tmp/rec/$w; rm -rf "$dir"; mkdir -p "$dir"
  timeout 300 python3 $args >"$dir/plain.txt" 2>&1
  echo "$w plain rc $?: $(grep -o '"step_times_s": \[[^]]*\]' "$dir/plain.txt" | head -c 300)"
  timeout 400 python3 -m maya record --out "$dir" -- python3 $args >"$dir/stdout.txt" 2>&1
  echo "$w record rc $?: $(grep -o '"step_times_s": \[[^]]*\]' "$dir/stdout.txt" | head -c 300)"
  python3 -c "
import sys; sys.path.insert(0, '.')
from pathlib import Path
from benchmarks.archives import pack
print(pack(Path('$dir'), Path('$OUT/$w.tar.xz')))"
done
