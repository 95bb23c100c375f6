"""Your own PyTorch classifier: the probability that Gaussian noise makes it misclassify one input.

Replace the model and the input with yours; any ``torch.nn.Module`` that maps a batch to logits
works, with inputs of any shape in [0, 1] (``clip=`` sets another range). Run:
``python examples/own_classifier.py``.
"""
import numpy as np, torch, scarce.vision  # noqa: E401

model = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(3 * 8 * 8, 10))  # stands for your trained classifier
x0 = np.random.default_rng(0).uniform(size=(3, 8, 8))  # stands for your input: one image, channels first
result = scarce.vision.failure_probability(model, x0, scale=0.05, n_samples=1000, seed=0)
print(result)
