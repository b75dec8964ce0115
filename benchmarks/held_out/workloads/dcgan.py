"""DCGAN on 64 x 64 images: a generator and a discriminator trained in turn, as the PyTorch example does.

Each step: the discriminator on a real batch and on a generated one (detached),
its Adam step; then the generator through the discriminator, its Adam step.
Transposed convolutions with BatchNorm and ReLU in the generator, strided
convolutions with BatchNorm and LeakyReLU in the discriminator, binary
cross-entropy on logits, fp32 with cuDNN autotuning.  "Real" images are
random tensors made on the GPU.

    python dcgan.py --batch 128 --nz 100 --ngf 64 --ndf 64
"""
import argparse
import json
import time

import torch
import torch.nn as nn

parser = argparse.ArgumentParser()
parser.add_argument("--batch", type=int, default=128)
parser.add_argument("--nz", type=int, default=100, help="latent size")
parser.add_argument("--ngf", type=int, default=64)
parser.add_argument("--ndf", type=int, default=64)
parser.add_argument("--steps", type=int, default=30)
parser.add_argument("--warmup", type=int, default=5)
opt = parser.parse_args()


def weights_init(m):
    name = m.__class__.__name__
    if "Conv" in name:
        nn.init.normal_(m.weight, 0.0, 0.02)
    elif "BatchNorm" in name:
        nn.init.normal_(m.weight, 1.0, 0.02)
        nn.init.zeros_(m.bias)


netG = nn.Sequential(
    nn.ConvTranspose2d(opt.nz, opt.ngf * 8, 4, 1, 0, bias=False), nn.BatchNorm2d(opt.ngf * 8), nn.ReLU(True),
    nn.ConvTranspose2d(opt.ngf * 8, opt.ngf * 4, 4, 2, 1, bias=False), nn.BatchNorm2d(opt.ngf * 4), nn.ReLU(True),
    nn.ConvTranspose2d(opt.ngf * 4, opt.ngf * 2, 4, 2, 1, bias=False), nn.BatchNorm2d(opt.ngf * 2), nn.ReLU(True),
    nn.ConvTranspose2d(opt.ngf * 2, opt.ngf, 4, 2, 1, bias=False), nn.BatchNorm2d(opt.ngf), nn.ReLU(True),
    nn.ConvTranspose2d(opt.ngf, 3, 4, 2, 1, bias=False), nn.Tanh(),
)
netD = nn.Sequential(
    nn.Conv2d(3, opt.ndf, 4, 2, 1, bias=False), nn.LeakyReLU(0.2, inplace=True),
    nn.Conv2d(opt.ndf, opt.ndf * 2, 4, 2, 1, bias=False), nn.BatchNorm2d(opt.ndf * 2), nn.LeakyReLU(0.2, inplace=True),
    nn.Conv2d(opt.ndf * 2, opt.ndf * 4, 4, 2, 1, bias=False), nn.BatchNorm2d(opt.ndf * 4),
    nn.LeakyReLU(0.2, inplace=True),
    nn.Conv2d(opt.ndf * 4, opt.ndf * 8, 4, 2, 1, bias=False), nn.BatchNorm2d(opt.ndf * 8),
    nn.LeakyReLU(0.2, inplace=True),
    nn.Conv2d(opt.ndf * 8, 1, 4, 1, 0, bias=False), nn.Flatten(),
)

device = torch.device("cuda:0")
torch.backends.cudnn.benchmark = True
netG.apply(weights_init).to(device)
netD.apply(weights_init).to(device)
criterion = nn.BCEWithLogitsLoss()
optD = torch.optim.Adam(netD.parameters(), lr=2e-4, betas=(0.5, 0.999))
optG = torch.optim.Adam(netG.parameters(), lr=2e-4, betas=(0.5, 0.999))
real_label, fake_label = 1.0, 0.0

times = []
for it in range(opt.warmup + opt.steps):
    torch.cuda.synchronize()
    start = time.perf_counter()
    real = torch.rand(opt.batch, 3, 64, 64, device=device) * 2 - 1
    label = torch.full((opt.batch, 1), real_label, device=device)
    netD.zero_grad()
    errD_real = criterion(netD(real), label)
    errD_real.backward()
    noise = torch.randn(opt.batch, opt.nz, 1, 1, device=device)
    fake = netG(noise)
    label.fill_(fake_label)
    errD_fake = criterion(netD(fake.detach()), label)
    errD_fake.backward()
    optD.step()
    netG.zero_grad()
    label.fill_(real_label)
    errG = criterion(netD(fake), label)
    errG.backward()
    optG.step()
    torch.cuda.synchronize()
    if it >= opt.warmup:
        times.append(time.perf_counter() - start)

print(json.dumps({"workload": "dcgan", "device": torch.cuda.get_device_name(device), "step_times_s": times,
                  "max_memory_allocated": torch.cuda.max_memory_allocated(device),
                  "max_memory_reserved": torch.cuda.max_memory_reserved(device), "args": vars(opt)}), flush=True)
