"""ResNet-18, CIFAR variant (3x3 stem, no max-pool), with GroupNorm instead of BatchNorm."""

from __future__ import annotations

import jax
from flax import nnx

from omnilearn_jax.models.cnn import group_norm


class BasicBlock(nnx.Module):
    def __init__(self, cin: int, cout: int, stride: int, rngs: nnx.Rngs):
        self.conv1 = nnx.Conv(cin, cout, (3, 3), strides=stride, use_bias=False, rngs=rngs)
        self.norm1 = group_norm(cout, rngs)
        self.conv2 = nnx.Conv(cout, cout, (3, 3), use_bias=False, rngs=rngs)
        self.norm2 = group_norm(cout, rngs)
        self.proj = self.proj_norm = nnx.data(None)
        if stride != 1 or cin != cout:
            self.proj = nnx.Conv(cin, cout, (1, 1), strides=stride, use_bias=False, rngs=rngs)
            self.proj_norm = group_norm(cout, rngs)

    def __call__(self, x):
        y = jax.nn.relu(self.norm1(self.conv1(x)))
        y = self.norm2(self.conv2(y))
        shortcut = x if self.proj is None else self.proj_norm(self.proj(x))
        return jax.nn.relu(y + shortcut)


class ResNet18(nnx.Module):
    def __init__(self, *, input_shape, num_classes, rngs, width=64, **unused):
        if len(input_shape) != 3:
            raise ValueError(f"model resnet18 needs image inputs [H, W, C]; got {input_shape}")
        self.stem = nnx.Conv(input_shape[-1], width, (3, 3), use_bias=False, rngs=rngs)
        self.stem_norm = group_norm(width, rngs)
        blocks, cin = [], width
        for stage, mult in enumerate((1, 2, 4, 8)):
            for i in range(2):
                stride = 2 if stage > 0 and i == 0 else 1
                blocks.append(BasicBlock(cin, width * mult, stride, rngs))
                cin = width * mult
        self.blocks = nnx.List(blocks)
        self.head = nnx.Linear(cin, num_classes, rngs=rngs)

    def __call__(self, x):
        x = jax.nn.relu(self.stem_norm(self.stem(x)))
        for block in self.blocks:
            x = block(x)
        return self.head(x.mean(axis=(1, 2)))
