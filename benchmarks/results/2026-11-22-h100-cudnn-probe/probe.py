import os, sys, torch, json, time
import torch.nn.functional as F
from torch.profiler import profile, ProfilerActivity
out = os.environ.get("OUT", "/tmp/out")
print(torch.__version__, torch.version.cuda, torch.backends.cudnn.version(), torch.cuda.get_device_name())
torch.backends.cudnn.benchmark = True
dev = "cuda"
def sdpa(causal, drop, B=2, H=4, L=256, D=64, Lk=None):
    Lk = Lk or L
    q = torch.randn(B, H, L, D, device=dev, dtype=torch.bfloat16, requires_grad=True)
    k = torch.randn(B, H, Lk, D, device=dev, dtype=torch.bfloat16, requires_grad=True)
    v = torch.randn(B, H, Lk, D, device=dev, dtype=torch.bfloat16, requires_grad=True)
    o = F.scaled_dot_product_attention(q, k, v, is_causal=causal, dropout_p=drop)
    o.sum().backward()
def conv(dtype, cl=True, bn=True):
    m = torch.nn.Sequential(torch.nn.Conv2d(16, 32, 3, padding=1), torch.nn.BatchNorm2d(32), torch.nn.ReLU(), torch.nn.Conv2d(32, 32, 3, stride=2, padding=1)).to(dev, dtype)
    x = torch.randn(4, 16, 32, 32, device=dev, dtype=dtype, requires_grad=True)
    if cl:
        m = m.to(memory_format=torch.channels_last); x = x.detach().to(memory_format=torch.channels_last).requires_grad_()
    y = m(x); y.float().sum().backward()
cases = {
 "sdpa_causal": lambda: sdpa(True, 0.0),
 "sdpa_full": lambda: sdpa(False, 0.0),
 "sdpa_dropout": lambda: sdpa(False, 0.1),
 "sdpa_big": lambda: sdpa(True, 0.0, B=8, H=12, L=1024, D=64),
 "conv_bf16": lambda: conv(torch.bfloat16),
 "conv_fp16": lambda: conv(torch.float16),
 "conv_fp32": lambda: conv(torch.float32),
 "conv_fp32_nchw": lambda: conv(torch.float32, cl=False),
}
res = {}
for name, fn in cases.items():
    try:
        fn(); torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as p:
            fn(); torch.cuda.synchronize()
        ks = []
        for e in p.events():
            if e.device_type == torch.autograd.DeviceType.CUDA:
                ks.append([e.name, e.device_time_total if hasattr(e,'device_time_total') else e.cuda_time_total])
        cpu_ops = [e.name for e in p.events() if e.device_type != torch.autograd.DeviceType.CUDA and ('cudnn' in e.name or 'attention' in e.name or 'conv' in e.name or 'batch_norm' in e.name)]
        res[name] = {"kernels": ks, "ops": cpu_ops}
        print("==", name); [print("   ", k) for k in ks]
    except Exception as ex:
        res[name] = {"error": repr(ex)}; print("==", name, "ERROR", ex)
json.dump(res, open(f"{out}/kernels.json", "w"), indent=1)
