import os, torch, json
import torch.nn.functional as F
from torch.profiler import profile, ProfilerActivity
out = os.environ.get("OUT", "/tmp/out")
torch.backends.cudnn.benchmark = True
dev = "cuda"
def sdpa(causal, B, H, L, D, Hk=None, drop=0.0):
    Hk = Hk or H
    q = torch.randn(B, H, L, D, device=dev, dtype=torch.bfloat16, requires_grad=True)
    k = torch.randn(B, Hk, L, D, device=dev, dtype=torch.bfloat16, requires_grad=True)
    v = torch.randn(B, Hk, L, D, device=dev, dtype=torch.bfloat16, requires_grad=True)
    o = F.scaled_dot_product_attention(q, k, v, is_causal=causal, dropout_p=drop, enable_gqa=(Hk != H))
    o.sum().backward()
def conv(dtype, N, C, K, HW, r, stride, cl=True):
    m = torch.nn.Conv2d(C, K, r, stride=stride, padding=r//2).to(dev, dtype)
    x = torch.randn(N, C, HW, HW, device=dev, dtype=dtype, requires_grad=True)
    if cl:
        m = m.to(memory_format=torch.channels_last); x = x.detach().to(memory_format=torch.channels_last).requires_grad_()
    y = m(x); y.float().sum().backward()
def bn(dtype):
    m = torch.nn.BatchNorm2d(64).to(dev)  # fp32 params
    x = torch.randn(32, 64, 56, 56, device=dev, dtype=dtype).to(memory_format=torch.channels_last).requires_grad_()
    with torch.autocast('cuda', dtype=dtype):
        y = m(x)
    y.float().sum().backward()
cases = {
 "sdpa_d128_causal": lambda: sdpa(True, 4, 16, 2048, 128),
 "sdpa_d64_gpt2": lambda: sdpa(True, 8, 12, 1024, 64),
 "sdpa_d128_full": lambda: sdpa(False, 4, 16, 2048, 128),
 "sdpa_gqa": lambda: sdpa(True, 2, 32, 1024, 128, Hk=8),
 "sdpa_d64_drop": lambda: sdpa(True, 8, 12, 1024, 64, drop=0.1),
 "conv_bf16_64_128_56_3": lambda: conv(torch.bfloat16, 32, 64, 128, 56, 3, 1),
 "conv_bf16_256_256_14_3s2": lambda: conv(torch.bfloat16, 32, 256, 256, 28, 3, 2),
 "conv_bf16_256_1024_14_1": lambda: conv(torch.bfloat16, 32, 256, 1024, 14, 1, 1),
 "conv_fp16_64_128_56_3": lambda: conv(torch.float16, 32, 64, 128, 56, 3, 1),
 "conv_fp32_64_128_56_3": lambda: conv(torch.float32, 32, 64, 128, 56, 3, 1),
 "bn_fp16_autocast": lambda: bn(torch.float16),
 "bn_bf16_autocast": lambda: bn(torch.bfloat16),
}
res = {}
for name, fn in cases.items():
    try:
        fn(); torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as p:
            fn(); torch.cuda.synchronize()
        ks = [[e.name, e.device_time_total] for e in p.events() if e.device_type == torch.autograd.DeviceType.CUDA]
        res[name] = {"kernels": ks}
    except Exception as ex:
        res[name] = {"error": repr(ex)}
    print("==", name, res[name].get("error", ""))
    for k, t in res[name].get("kernels", []):
        if "at::native" not in k: print("   %.1f %s" % (t, k[:160]))
json.dump(res, open(f"{out}/kernels2.json", "w"), indent=1)
