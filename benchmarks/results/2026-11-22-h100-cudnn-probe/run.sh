set -x
cd /work/main 2>/dev/null || true
nvidia-smi -L; which python3
python3 -c "import torch; print(torch.__version__)"
P=$(pwd)/.gpuprobe/probe.py
PYTHONUNBUFFERED=1 python3 $P 2>&1 | tee $OUT/probe.log
# cuDNN backend API log for a small subset (separate process, logging slows things)
cat > /tmp/small.py <<'PY'
import torch, torch.nn.functional as F
torch.backends.cudnn.benchmark=True
import sys
w = sys.argv[1]
d='cuda'
if w=='sdpa':
    for causal in (True, False):
        q=torch.randn(2,4,256,64,device=d,dtype=torch.bfloat16,requires_grad=True); k=torch.randn_like(q,requires_grad=True); v=torch.randn_like(q,requires_grad=True)
        F.scaled_dot_product_attention(q,k,v,is_causal=causal).sum().backward()
    q=torch.randn(2,4,256,64,device=d,dtype=torch.bfloat16,requires_grad=True); k=torch.randn_like(q,requires_grad=True); v=torch.randn_like(q,requires_grad=True)
    F.scaled_dot_product_attention(q,k,v,dropout_p=0.1).sum().backward()
else:
    m=torch.nn.Sequential(torch.nn.Conv2d(16,32,3,padding=1),torch.nn.BatchNorm2d(32)).to(d,torch.bfloat16).to(memory_format=torch.channels_last)
    x=torch.randn(4,16,32,32,device=d,dtype=torch.bfloat16).to(memory_format=torch.channels_last).requires_grad_()
    m(x).float().sum().backward()
torch.cuda.synchronize()
PY
for w in sdpa conv; do
CUDNN_LOGLEVEL_DBG=3 CUDNN_LOGDEST_DBG=/tmp/cudnn_$w.log CUDNN_FRONTEND_LOG_INFO=1 CUDNN_FRONTEND_LOG_FILE=/tmp/fe_$w.log python3 /tmp/small.py $w 2>&1 | tail -5
ls -la /tmp/cudnn_$w.log /tmp/fe_$w.log
gzip -c /tmp/cudnn_$w.log > $OUT/cudnn_$w.log.gz; gzip -c /tmp/fe_$w.log > $OUT/fe_$w.log.gz
done
python3 - <<'PY'
import torch
print(torch.backends.cudnn.version())
PY
