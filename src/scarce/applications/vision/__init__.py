"""Vision application: rare misclassifications of an MNIST classifier under input perturbations.

Modules (import them directly; this package does not import torch):

* :mod:`scarce.applications.vision.classifier`: :class:`SmallCNN`, seeded deterministic training
  with an on-disk safetensors cache, prediction and accuracy helpers.

The data come from :func:`scarce.datasets.load_mnist`.
"""
