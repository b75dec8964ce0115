"""ResNet-style CNN training (ResNet-18 shapes by default), built by hand.

cuDNN convolutions and BatchNorm, channels_last, cudnn.benchmark, bf16
autocast, SGD with momentum, random images made on the GPU.  Prints one
JSON line at the end (see common.py).

    python examples/cnn.py --steps 4 --profile-step 2
"""
import argparse

import torch
import torch.nn as nn
import torch.nn.functional as F
from common import add_common_args, parse_args, train


class BasicBlock(nn.Module):
    def __init__(self, cin: int, cout: int, stride: int):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.down = None
        if stride != 1 or cin != cout:
            self.down = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        y = F.relu(self.bn1(self.conv1(x)))
        y = self.bn2(self.conv2(y))
        return F.relu(y + (x if self.down is None else self.down(x)))


class ResNet(nn.Module):
    def __init__(self, blocks: list[int], width: int, classes: int):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, width, 7, 2, 3, bias=False), nn.BatchNorm2d(width),
                                  nn.ReLU(inplace=True), nn.MaxPool2d(3, 2, 1))
        layers, cin = [], width
        for stage, n in enumerate(blocks):
            cout = width * 2 ** stage
            for j in range(n):
                layers.append(BasicBlock(cin, cout, 2 if (j == 0 and stage > 0) else 1))
                cin = cout
        self.layers = nn.Sequential(*layers)
        self.fc = nn.Linear(cin, classes)

    def forward(self, x):
        x = self.layers(self.stem(x))
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--image-size", type=int, default=224)
    p.add_argument("--width", type=int, default=64)
    p.add_argument("--blocks", default="2,2,2,2", help="blocks per stage (default %(default)s)")
    p.add_argument("--classes", type=int, default=1000)
    p.add_argument("--lr", type=float, default=0.1)
    add_common_args(p)
    args = parse_args(p)
    torch.manual_seed(args.seed)
    torch.backends.cudnn.benchmark = True
    dev = torch.device("cuda")
    with dev:
        model = ResNet([int(b) for b in args.blocks.split(",")], args.width, args.classes)
    model = model.to(memory_format=torch.channels_last)
    opt = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9, weight_decay=1e-4)

    def step(i: int) -> None:
        x = torch.randn(args.batch, 3, args.image_size, args.image_size, device=dev)
        x = x.to(memory_format=torch.channels_last)
        y = torch.randint(0, args.classes, (args.batch,), device=dev)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    n_params = sum(p.numel() for p in model.parameters())
    train("cnn", args, step, {"parameters": n_params})


if __name__ == "__main__":
    main()
