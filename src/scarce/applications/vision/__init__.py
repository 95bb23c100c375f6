"""Vision application: rare misclassifications of an MNIST classifier under input perturbations.

Modules (import them directly; this package does not import torch):

* :mod:`scarce.applications.vision.classifier`: :class:`SmallCNN`, seeded deterministic training
  with an on-disk safetensors cache, prediction and accuracy helpers.
* :mod:`.noise`: Gaussian and uniform L-infinity perturbations as maps from N(0, I).
* :mod:`.problem`: :class:`VisionModel` (one batched forward pass: logits, embedding, failure)
  and :func:`perturbation_problem` (margin or ruler score, exact terminal event).
* :mod:`.offline`: labelled embeddings harvested from training seeds; fitting the rulers.
* :mod:`.methods`: SMC, margin Subset Simulation, AMLS (Webb 2019) and SCARCE rulers by key.
* :mod:`.pipeline`: :func:`build_context` (data, classifier, contrastive head, rulers; cached).
* :mod:`.protocol`: the paper's two-step protocol as a resumable run, with presets.

The data come from :func:`scarce.datasets.load_mnist`.
"""
