"""Your own PyTorch classifier: rare-failure probabilities under input noise, in one call.

>>> import scarce.vision                                                  # doctest: +SKIP
>>> result = scarce.vision.failure_probability(model, x0, scale=0.2)      # doctest: +SKIP
>>> print(result)                                                         # doctest: +SKIP

* :func:`failure_probability`: any ``torch.nn.Module`` mapping a batch to logits, one input
  ``x0`` of any shape, Gaussian or uniform L-infinity noise (or your own transform), failure as
  misclassification, a targeted class or your own function of the logits; Subset Simulation
  with the exact terminal event, batched forward passes, on the GPU with ``device="auto"``.
* ``target=``: a classifier that answers with labels only (a function of a batch, or an object
  with ``predict_labels``); the failure is its decision, and your own network supplies the levels.
* :func:`harvest` and :meth:`Harvest.fit_ruler`: labelled embeddings of any named layer on
  perturbed training inputs, and a (class-conditioned) ruler fitted on them, for
  ``score=ruler`` (SCARCE).
* :class:`GaussianNoise`, :class:`UniformNoise`, :class:`CustomNoise`, :class:`Misclassification`,
  :class:`Targeted`, :class:`LogitsEvent`, :class:`TorchClassifier`: the pieces, for finer control.

This module imports nothing heavy until a name is used (torch loads with the first call).
"""

from scarce._lazy import lazy_module

_VISION = "scarce.applications.vision"
_EXPORTS = {
    "failure_probability": f"{_VISION}.api",
    "harvest": f"{_VISION}.api",
    "Harvest": f"{_VISION}.api",
    "vision_model": f"{_VISION}.api",
    "GaussianNoise": f"{_VISION}.noise",
    "UniformNoise": f"{_VISION}.noise",
    "CustomNoise": f"{_VISION}.noise",
    "Misclassification": f"{_VISION}.events",
    "Targeted": f"{_VISION}.events",
    "LogitsEvent": f"{_VISION}.events",
    "TorchClassifier": f"{_VISION}.layers",
    "layer_names": f"{_VISION}.layers",
}

__all__, __getattr__, __dir__ = lazy_module(__name__, _EXPORTS)
