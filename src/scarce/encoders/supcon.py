r"""Supervised contrastive projection heads (Khosla et al. 2020, "Supervised Contrastive Learning").

SCARCE needs an encoder whose embeddings put failures and normal samples in distinguishable
regions (the paper's condition C1). This module trains a small MLP *projection head* on top of
features that already exist (a classifier's penultimate layer, a judge's hidden states) with the
supervised contrastive loss on the failure labels, so that the encoder costs no extra forward pass
of the model:

.. math::
    \mathcal{L} = \frac{1}{|I|}\sum_{i \in I} \frac{-1}{|P(i)|} \sum_{p \in P(i)}
        \log \frac{\exp(z_i \cdot z_p / T)}{\sum_{a \ne i} \exp(z_i \cdot z_a / T)},

with ``z`` the L2-normalised head outputs, ``P(i)`` the other samples of the batch with the label
of ``i`` and ``T`` the temperature. Batches are drawn balanced between the classes, because
failures are rare in the labelled pool.

The same head (``4096 -> 256 -> 64``) is the paper's optional projection stage on Llama-Guard
hidden states; for MNIST it maps the CNN's penultimate features, joined with the one-hot label of
the seed image, to 64 dimensions.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from scarce.checks import check_embeddings, check_labels
from scarce.checks import check_in_interval, check_positive_int
from scarce.errors import ScarceError
from scarce.seeding import SeedLike, as_generator

__all__ = ["HeadConfig", "ProjectionHead", "supcon_loss", "train_projection_head"]


@dataclass(frozen=True)
class HeadConfig:
    """Architecture and training settings of a projection head.

    ``hidden`` and ``out_dim`` give the MLP ``in_dim -> hidden -> out_dim``; ``steps`` optimiser
    steps of Adam on balanced batches of ``batch_size`` (half failures, half normal).
    """

    hidden: int = 256
    out_dim: int = 64
    temperature: float = 0.1
    steps: int = 400
    batch_size: int = 256
    learning_rate: float = 1e-3
    weight_decay: float = 1e-4

    def __post_init__(self) -> None:
        for name in ("hidden", "out_dim", "steps"):
            check_positive_int(name, getattr(self, name))
        check_positive_int("batch_size", self.batch_size, minimum=4)
        check_in_interval("temperature", self.temperature, 0.0, float("inf"), high_open=True)
        check_in_interval("learning_rate", self.learning_rate, 0.0, float("inf"), high_open=True)
        check_in_interval("weight_decay", self.weight_decay, 0.0, float("inf"), low_open=False,
                          high_open=True)


def _torch() -> Any:
    try:
        import torch
    except ImportError as exc:  # pragma: no cover - exercised only without torch
        raise ImportError("projection heads need PyTorch: pip install 'scarce[torch]'") from exc
    return torch


def _build_mlp(in_dim: int, config: HeadConfig) -> Any:
    nn = _torch().nn
    return nn.Sequential(
        nn.Linear(in_dim, config.hidden), nn.ReLU(), nn.Linear(config.hidden, config.out_dim)
    )


class ProjectionHead:
    """A trained MLP ``in_dim -> hidden -> out_dim`` with L2-normalised output.

    Inputs are standardised with the mean and scale of the training features (stored with the
    weights), so the head works on raw features. Use :func:`train_projection_head` to build one.
    """

    def __init__(self, network: Any, mean: np.ndarray, scale: np.ndarray, config: HeadConfig):
        self.network = network.eval()
        self.mean = np.asarray(mean, dtype=np.float32)
        self.scale = np.asarray(scale, dtype=np.float32)
        self.config = config

    @property
    def in_dim(self) -> int:
        return int(self.mean.size)

    @property
    def out_dim(self) -> int:
        return int(self.config.out_dim)

    def transform_tensor(self, features: Any) -> Any:
        """Embed a float tensor of shape (n, in_dim) (no gradient); returns a tensor (n, out_dim)."""
        torch = _torch()
        mean = torch.as_tensor(self.mean, device=features.device)
        scale = torch.as_tensor(self.scale, device=features.device)
        with torch.inference_mode():
            z = self.network((features.float() - mean) / scale)
            return torch.nn.functional.normalize(z, dim=1)

    def transform(self, features: np.ndarray) -> np.ndarray:
        """Embed features of shape (n, in_dim) to unit vectors of shape (n, out_dim), float64."""
        X = check_embeddings(features, name="features", n_features=self.in_dim)
        torch = _torch()
        device = next(self.network.parameters()).device
        return self.transform_tensor(torch.from_numpy(X.astype(np.float32)).to(device)).double().cpu().numpy()

    def state(self) -> dict[str, Any]:
        """Tensors to save with safetensors (weights plus the standardisation)."""
        torch = _torch()
        tensors = {f"network.{k}": v.detach().clone() for k, v in self.network.state_dict().items()}
        tensors["mean"] = torch.from_numpy(self.mean.copy())
        tensors["scale"] = torch.from_numpy(self.scale.copy())
        return tensors

    @classmethod
    def from_state(cls, tensors: dict[str, Any], config: HeadConfig) -> ProjectionHead:
        """Rebuild a head from :meth:`state` and its config."""
        mean = tensors["mean"].numpy()
        network = _build_mlp(int(mean.size), config)
        network.load_state_dict({k[len("network."):]: v for k, v in tensors.items()
                                 if k.startswith("network.")})
        return cls(network, mean, tensors["scale"].numpy(), config)

    def fingerprint(self) -> str:
        """A sha256 of the weights and config (for result provenance and caches)."""
        digest = hashlib.sha256(json.dumps(asdict(self.config), sort_keys=True).encode())
        for key, value in sorted(self.state().items()):
            digest.update(key.encode())
            digest.update(value.numpy().tobytes())
        return digest.hexdigest()


def supcon_loss(z: Any, labels: Any, temperature: float) -> Any:
    """Supervised contrastive loss of L2-normalised embeddings ``z`` (n, k) with integer labels."""
    torch = _torch()
    logits = z @ z.T / temperature
    n = z.shape[0]
    eye = torch.eye(n, dtype=torch.bool, device=z.device)
    logits = logits.masked_fill(eye, float("-inf"))
    log_prob = logits - torch.logsumexp(logits, dim=1, keepdim=True)
    positives = (labels[:, None] == labels[None, :]) & ~eye
    n_pos = positives.sum(dim=1)
    keep = n_pos > 0
    pos_log_prob = torch.where(positives, log_prob, torch.zeros_like(log_prob)).sum(dim=1)
    return -(pos_log_prob[keep] / n_pos[keep]).mean()


def train_projection_head(
    features: np.ndarray,
    labels: np.ndarray,
    config: HeadConfig = HeadConfig(),
    *,
    seed: SeedLike = 0,
) -> ProjectionHead:
    """Train a projection head with the supervised contrastive loss on binary failure labels.

    Parameters
    ----------
    features : array of shape (n, in_dim)
        Inputs of the head (finite).
    labels : array of shape (n,)
        1 = failure ("bad"), 0 = normal; both classes must be present, with at least two of each.
    config : HeadConfig
    seed : int, SeedSequence or Generator
        Seeds the weight initialisation and the batch draws (explicit generators; no global seed).

    Returns
    -------
    ProjectionHead
        Deterministic on CPU for a given seed.
    """
    X = check_embeddings(features, name="features")
    y = check_labels(labels, n_samples=X.shape[0], name="labels")
    counts = np.bincount(y.astype(np.int64), minlength=2)
    if counts.min() < 2:
        raise ScarceError(
            f"labels must hold at least 2 failures and 2 normal samples to train a contrastive head, "
            f"got {counts[1]} failure(s) and {counts[0]} normal"
        )
    torch = _torch()
    rng = as_generator(seed)
    generator = torch.Generator().manual_seed(int(rng.integers(2**62)))
    mean = X.mean(axis=0)
    scale = X.std(axis=0)
    scale = np.where(scale > 1e-8, scale, 1.0)
    Xs = torch.from_numpy(((X - mean) / scale).astype(np.float32))
    network = _build_mlp(X.shape[1], config)
    with torch.no_grad():
        for parameter in network.parameters():
            if parameter.ndim == 2:
                torch.nn.init.kaiming_uniform_(parameter, a=5 ** 0.5, generator=generator)
            else:
                parameter.uniform_(-0.01, 0.01, generator=generator)
    optimiser = torch.optim.AdamW(network.parameters(), lr=config.learning_rate,
                                  weight_decay=config.weight_decay)
    network.train()
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # a small MLP: intra-op threads only add synchronisation cost
    try:
        _optimise(network, optimiser, Xs, y, rng, config)
    finally:
        torch.set_num_threads(threads)
    return ProjectionHead(network, mean, scale, config)


def _optimise(network: Any, optimiser: Any, Xs: Any, y: np.ndarray, rng: np.random.Generator,
              config: HeadConfig) -> None:
    torch = _torch()
    bad = np.flatnonzero(y)
    good = np.flatnonzero(~y)
    half = config.batch_size // 2
    for _ in range(config.steps):
        batch = np.concatenate([
            rng.choice(bad, size=half, replace=bad.size < half),
            rng.choice(good, size=half, replace=good.size < half),
        ])
        z = torch.nn.functional.normalize(network(Xs[batch]), dim=1)
        target = torch.from_numpy(y[batch].astype(np.int64))
        loss = supcon_loss(z, target, config.temperature)
        optimiser.zero_grad()
        loss.backward()
        optimiser.step()
