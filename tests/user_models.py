"""Small PyTorch classifiers a user might bring (not the demo's CNN), with seeds where failure is rare.

Weights are drawn from a numpy generator (He initialisation, zero biases), so no global RNG is
touched and every test sees the same models.
"""

from __future__ import annotations

import numpy as np
import torch


def _fill(module: torch.nn.Module, seed: int) -> torch.nn.Module:
    """Weights drawn from a numpy generator (no global torch RNG), then the module in eval mode."""
    rng = np.random.default_rng(seed)
    with torch.no_grad():
        for name, p in module.named_parameters():
            scale = 0.0 if name.endswith("bias") else np.sqrt(2.0 / p[0].numel())  # He initialisation
            p.copy_(torch.from_numpy(rng.normal(0.0, 1.0, p.shape) * scale).float())
    return module.eval()


def mlp() -> torch.nn.Module:
    return _fill(torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(48, 16), torch.nn.ReLU(),
                                     torch.nn.Linear(16, 4)), seed=0)


class SmallColourCNN(torch.nn.Module):
    """3 x 16 x 16 inputs, named blocks (``block1``, ``head``), 6 classes."""

    def __init__(self) -> None:
        super().__init__()
        self.block1 = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d(2))
        self.block2 = torch.nn.Sequential(torch.nn.Conv2d(4, 8, 3, padding=1), torch.nn.ReLU(), torch.nn.AdaptiveAvgPool2d(2))
        self.head = torch.nn.Linear(32, 6)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.block2(self.block1(x)).flatten(1))


def cnn() -> torch.nn.Module:
    return _fill(SmallColourCNN(), seed=1)


def mlp_surrogate(relative: float = 0.1, seed: int = 5) -> torch.nn.Module:
    """The MLP with every weight moved by ``relative`` times its tensor's mean size: a user's own
    network trained on the same task, whose boundary is near the target's but not on it."""
    surrogate = mlp()
    rng = np.random.default_rng(seed)
    with torch.no_grad():
        for p in surrogate.parameters():
            p.add_(torch.from_numpy(rng.normal(0.0, 1.0, p.shape)).float() * relative * p.abs().mean())
    return surrogate


# Seeds whose failure probability is about 3e-3 (MLP, scale 0.25) and 1.5e-3 (CNN, scale 0.15)
X_MLP = np.random.default_rng(13).uniform(size=(3, 4, 4))
X_CNN = np.random.default_rng(0).uniform(size=(3, 16, 16))
