"""Applications of the estimator to AI systems: ``vision`` (MNIST classifiers under perturbation).

Subpackages import torch only in the modules that need it, never at package import.
"""
