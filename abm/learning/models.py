"""Small torch models: MLPs and a tiny CNN, each a feature ``body`` followed by a linear ``head``.

Every model takes flat inputs [n, d] (the CNN reshapes to its image shape), so input gradients
and dreams always have the data's flat shape, whatever the architecture.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

import torch
from torch import nn


class Classifier(nn.Module):
    """``head(body(x))``; ``embed_dim`` is the width of the body's output."""

    def __init__(self, body: nn.Module, embed_dim: int, n_classes: int) -> None:
        super().__init__()
        self.body = body
        self.embed_dim = embed_dim
        self.head = nn.Linear(embed_dim, n_classes)

    def features(self, x: torch.Tensor) -> torch.Tensor:
        """The body's output (the representation the head reads)."""
        return self.body(x)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.body(x))


def mlp_body(in_dim: int, hidden: list[int], batchnorm: bool) -> nn.Sequential:
    """Linear (+ BatchNorm1d) + ReLU blocks."""
    layers: list[nn.Module] = []
    prev = in_dim
    for width in hidden:
        layers.append(nn.Linear(prev, width))
        if batchnorm:
            layers.append(nn.BatchNorm1d(width))
        layers.append(nn.ReLU())
        prev = width
    return nn.Sequential(*layers)


class _Reshape(nn.Module):
    def __init__(self, shape: tuple[int, ...]) -> None:
        super().__init__()
        self.shape = shape

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.reshape(x.shape[0], *self.shape)


def cnn_body(input_shape: tuple[int, ...], channels: list[int], embed_dim: int, batchnorm: bool) -> nn.Sequential:
    """Tiny CNN on (C, H, W) images: 3x3 conv (+BN) + ReLU blocks, global pooling, a linear."""
    if len(input_shape) != 3:
        raise ValueError(f"a CNN needs image-shaped inputs (C, H, W), got {input_shape}")
    layers: list[nn.Module] = [_Reshape(input_shape)]
    prev = input_shape[0]
    for i, ch in enumerate(channels):
        layers.append(nn.Conv2d(prev, ch, 3, padding=1))
        if batchnorm:
            layers.append(nn.BatchNorm2d(ch))
        layers.append(nn.ReLU())
        if i < len(channels) - 1:
            layers.append(nn.MaxPool2d(2))
        prev = ch
    layers += [
        nn.AdaptiveAvgPool2d(2),
        nn.Flatten(),
        nn.Linear(prev * 4, embed_dim),
        nn.ReLU(),
    ]
    return nn.Sequential(*layers)


def build_model(
    kind: str,
    input_shape: tuple[int, ...],
    n_classes: int,
    hidden: list[int] | None = None,
    channels: list[int] | None = None,
    embed_dim: int = 32,
    batchnorm: bool = True,
) -> Classifier:
    """Build an ``mlp`` (widths ``hidden``) or a ``cnn`` (``channels``, then ``embed_dim``)."""
    in_dim = math.prod(input_shape)
    if kind == "mlp":
        widths = list(hidden or [64])
        return Classifier(mlp_body(in_dim, widths, batchnorm), widths[-1], n_classes)
    if kind == "cnn":
        body = cnn_body(input_shape, list(channels or [8, 16]), embed_dim, batchnorm)
        return Classifier(body, embed_dim, n_classes)
    raise ValueError(f"unknown model kind {kind!r}; allowed: mlp, cnn")


def flat_params(model: nn.Module) -> torch.Tensor:
    """All parameters and floating buffers (BatchNorm statistics), flattened in state-dict order."""
    return torch.cat([t.detach().reshape(-1).float() for t in _float_state(model).values()])


def load_flat_params(model: nn.Module, flat: torch.Tensor) -> None:
    """Inverse of :func:`flat_params`."""
    state = _float_state(model)
    offset = 0
    new = {}
    for name, t in state.items():
        n = t.numel()
        new[name] = flat[offset : offset + n].reshape(t.shape).to(t.dtype)
        offset += n
    if offset != flat.numel():
        raise ValueError(f"flat vector has {flat.numel()} values, model needs {offset}")
    model.load_state_dict(new, strict=False)


def trainable_flat(model: nn.Module) -> torch.Tensor:
    """The trainable parameters only (no buffers), flattened in ``model.parameters()`` order."""
    return torch.cat([q.detach().reshape(-1).float() for q in model.parameters()])


def load_trainable_flat(model: nn.Module, flat: torch.Tensor) -> None:
    """Inverse of :func:`trainable_flat`; buffers (BatchNorm running statistics) are left as they are."""
    offset = 0
    with torch.no_grad():
        for q in model.parameters():
            n = q.numel()
            q.copy_(flat[offset : offset + n].reshape(q.shape).to(q.dtype))
            offset += n
    if offset != flat.numel():
        raise ValueError(f"flat vector has {flat.numel()} values, model has {offset} parameters")


def _float_state(model: nn.Module) -> dict[str, torch.Tensor]:
    return {k: v for k, v in model.state_dict().items() if v.is_floating_point()}


def architecture_key(model: nn.Module) -> tuple:
    """Names and shapes of the model's float state, to check that architectures coincide."""
    return tuple((k, tuple(v.shape)) for k, v in _float_state(model).items())


def one_architecture(models: Iterable[nn.Module]) -> bool:
    """Whether the models share one architecture (:func:`architecture_key`), as averaging or
    aligning their parameters needs."""
    return len({architecture_key(m) for m in models}) <= 1
