"""ResNet-50 ImageNet training throughput test: bf16 autocast, channels_last, SGD with Nesterov momentum.

The network is written out here (bottleneck blocks, 3-4-6-3) so the script
needs nothing beyond torch.  cudnn.benchmark picks the convolution algorithms
during warm-up.
"""
import argparse
import json
import time

import torch
import torch.nn as nn


def conv_bn(cin, cout, k, stride=1, relu=True):
    layers = [nn.Conv2d(cin, cout, k, stride=stride, padding=k // 2, bias=False), nn.BatchNorm2d(cout)]
    if relu:
        layers.append(nn.ReLU(inplace=True))
    return nn.Sequential(*layers)


class Bottleneck(nn.Module):
    expansion = 4

    def __init__(self, cin, width, stride):
        super().__init__()
        cout = width * self.expansion
        self.body = nn.Sequential(conv_bn(cin, width, 1), conv_bn(width, width, 3, stride),
                                  conv_bn(width, cout, 1, relu=False))
        nn.init.zeros_(self.body[2][1].weight)  # zero-init the last BN of each residual branch
        self.shortcut = conv_bn(cin, cout, 1, stride, relu=False) if stride != 1 or cin != cout else nn.Identity()
        self.relu = nn.ReLU(inplace=True)

    def forward(self, x):
        return self.relu(self.body(x) + self.shortcut(x))


class ResNet50(nn.Module):
    def __init__(self, num_classes=1000):
        super().__init__()
        self.stem = nn.Sequential(conv_bn(3, 64, 7, stride=2), nn.MaxPool2d(3, 2, 1))
        stages, cin = [], 64
        for width, blocks, stride in [(64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2)]:
            for b in range(blocks):
                stages.append(Bottleneck(cin, width, stride if b == 0 else 1))
                cin = width * Bottleneck.expansion
        self.stages = nn.Sequential(*stages)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(cin, num_classes)

    def forward(self, x):
        return self.fc(torch.flatten(self.pool(self.stages(self.stem(x))), 1))


def main():
    parser = argparse.ArgumentParser(description="ResNet-50 training benchmark")
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--image-size", type=int, default=224)
    parser.add_argument("--classes", type=int, default=1000)
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--warmup", type=int, default=5)
    args = parser.parse_args()

    torch.backends.cudnn.benchmark = True
    model = ResNet50(args.classes).cuda().to(memory_format=torch.channels_last)
    params_bn = [p for n, p in model.named_parameters() if p.ndim <= 1]
    params_w = [p for n, p in model.named_parameters() if p.ndim > 1]
    optimizer = torch.optim.SGD([{"params": params_w, "weight_decay": 5e-5},
                                 {"params": params_bn, "weight_decay": 0}],
                                lr=0.256, momentum=0.875, nesterov=True)
    criterion = nn.CrossEntropyLoss().cuda()

    # A fixed synthetic batch, as DALI-free throughput tests use.
    images = torch.randn(args.batch, 3, args.image_size, args.image_size, device="cuda")
    images = images.contiguous(memory_format=torch.channels_last)
    target = torch.randint(0, args.classes, (args.batch,), device="cuda")

    step_time = []
    for it in range(args.warmup + args.steps):
        torch.cuda.synchronize()
        end = time.perf_counter()
        with torch.autocast(device_type="cuda", dtype=torch.bfloat16):
            output = model(images)
            loss = criterion(output, target)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        torch.cuda.synchronize()
        if it >= args.warmup:
            step_time.append(time.perf_counter() - end)

    print(json.dumps({
        "workload": "resnet50",
        "world_size": 1,
        "device": torch.cuda.get_device_name(0),
        "images_per_s": args.batch * len(step_time) / sum(step_time),
        "step_times_s": step_time,
        "max_memory_allocated": torch.cuda.max_memory_allocated(),
        "max_memory_reserved": torch.cuda.max_memory_reserved(),
        "args": vars(args),
    }))


if __name__ == "__main__":
    main()
