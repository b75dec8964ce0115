"""A few seconds of every kind of device work, to check record mode end to end:
cuBLAS and cuBLASLt GEMMs, cuDNN attention, convolution and batch norm, plain
kernels, copies both ways (pageable and pinned) and a memset."""

import torch
import torch.nn.functional as F

torch.backends.cudnn.benchmark = False
dev = "cuda"
a = torch.randn(512, 1024, device=dev)
b = torch.randn(1024, 256, device=dev)
(a @ b).sum()                                            # Sgemm + reduction
x = torch.randn(64, 1024, device=dev, dtype=torch.bfloat16, requires_grad=True)
lin = torch.nn.Linear(1024, 4096, device=dev, dtype=torch.bfloat16)
y = F.gelu(lin(x))                                       # Lt bias epilogue + elementwise
y.float().pow(2).mean().backward()
q = torch.randn(2, 8, 256, 64, device=dev, dtype=torch.bfloat16, requires_grad=True)
o = F.scaled_dot_product_attention(q, q, q, is_causal=True)   # cuDNN / flash attention
o.sum().backward()
torch.bmm(torch.randn(8, 64, 32, device=dev), torch.randn(8, 32, 16, device=dev))
img = torch.randn(8, 32, 28, 28, device=dev, requires_grad=True).to(memory_format=torch.channels_last)
conv = torch.nn.Conv2d(32, 64, 3, padding=1, device=dev).to(memory_format=torch.channels_last)
bn = torch.nn.BatchNorm2d(64, device=dev)
bn(conv(img)).relu().sum().backward()
host = torch.randn(1 << 20)
pinned = host.pin_memory()
d1 = host.to(dev)
d2 = pinned.to(dev, non_blocking=True)
d1.cpu()
d2.zero_()
torch.cuda.synchronize()
print("smoke ok")
