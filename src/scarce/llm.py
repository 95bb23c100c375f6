"""Your own evaluation corpus: fleet-level jailbreak probabilities in one call.

>>> import scarce.llm                                                              # doctest: +SKIP
>>> corpus = scarce.llm.read_conversations("results/llama2_7b.json", method="GCG")  # doctest: +SKIP
>>> embedded = scarce.llm.embed_corpus(corpus, "minilm")                           # doctest: +SKIP
>>> print(scarce.llm.fleet_probability(embedded, eta=1e-3, ruler="centroid"))      # doctest: +SKIP

* :func:`read_conversations`: the files evaluation tools write (JailbreakBench artifacts,
  HarmBench completions with classifier labels, garak reports, plain JSONL/CSV with ``prompt``,
  ``response``, ``label``) as one corpus table; the format is inferred where unambiguous.
* :func:`embed_corpus`: every conversation embedded whole (the bundled sentence encoder, or a
  judge model's hidden states), cached on disk.
* :func:`fleet_probability`: SCARCE's calibrated cascade for a fleet with adversarial fraction
  ``eta``, with its interval, the interval carrying the calibration's uncertainty, and the
  finite-sample reference.

Nothing heavy is imported until a name is used.
"""

from scarce._lazy import lazy_module

_LLM = "scarce.applications.llm"
_EXPORTS = {
    "fleet_probability": f"{_LLM}.api",
    "FleetEstimate": f"{_LLM}.api",
    "read_conversations": f"{_LLM}.sources",
    "infer_format": f"{_LLM}.sources",
    "FORMATS": f"{_LLM}.sources",
    "embed_corpus": f"{_LLM}.embedding",
    "read_corpus": f"{_LLM}.corpus",
    "write_corpus": f"{_LLM}.corpus",
}

__all__, __getattr__, __dir__ = lazy_module(__name__, _EXPORTS)
