"""``scarce vision estimate``: your own classifier (a factory and safetensors weights) on your own input.

``scarce vision estimate --model mypkg.models:build --weights model.safetensors --input image.png --scale 0.2``
builds the model, loads its weights (safetensors only), reads the input, estimates the probability
that the model fails under the noise with Subset Simulation, and prints the level table and the
result (``--json``: the result as JSON). With ``--labels-from package.module:name`` the classifier
under test is that function of a batch, which answers with labels only, and the model is the
user's own network whose margin sets the levels (:func:`scarce.vision.failure_probability`'s
``target``).
"""

from __future__ import annotations

from typing import Optional

import typer

from scarce.cli.common import (ALLOW_LARGE, CONFIDENCE, DELTA, JSON_OUTPUT, LEVEL_PROBABILITY_HELP, check_path_option,
                               check_report_options, cli_message, describe_os_error, fail, level_probability_option,
                               show_estimate)


def _numbers(option: str, text: Optional[str], kind: type = float) -> Optional[tuple]:  # type: ignore[type-arg]
    """``"0,1"`` -> ``(0.0, 1.0)``; ``None``/``"none"`` -> None; anything else a clear error."""
    from scarce.errors import ScarceError

    if text is None or text.strip().lower() == "none":
        return None
    try:
        return tuple(kind(part) for part in text.split(","))
    except ValueError:
        raise ScarceError(f"{option} must be comma-separated {kind.__name__}s (or 'none'), got {text!r}") from None


def estimate(
    model: str = typer.Option(..., help="Import path of a factory returning the torch.nn.Module: package.module:function."),
    input_file: str = typer.Option(..., "--input", help="The input: a .npy array or an image (PNG, JPEG; channels first, values in [0, 1])."),
    weights: Optional[str] = typer.Option(None, help="A safetensors file of the model's state dict (pickle checkpoints are refused)."),
    shape: Optional[str] = typer.Option(None, help="Reshape the input to this shape, e.g. 3,32,32 (default: as read)."),
    label: Optional[int] = typer.Option(None, help="The input's correct class (default: the model's prediction on it)."),
    target: Optional[int] = typer.Option(None, help="Failure is a decision for this class (default: any other than the label)."),
    noise: str = typer.Option("gaussian", help="gaussian (x0 + scale*u) or uniform (each value shifted by U(-scale, scale))."),
    scale: float = typer.Option(0.2, help="Gaussian sigma or uniform epsilon."),
    clip: str = typer.Option("0,1", help="Value range perturbed inputs are clipped to, low,high; 'none' for no clipping."),
    n_samples: int = typer.Option(2000, help="Samples per level."),
    level_probability: str = typer.Option("auto", help=LEVEL_PROBABILITY_HELP),
    max_queries: Optional[int] = typer.Option(None, help="Query budget; a partial, flagged result when exhausted."),
    seed: int = typer.Option(0, help="Random seed (same seed, same result on the same device kind)."),
    device: str = typer.Option("auto", help="Where forward passes run: auto (CUDA when present), cpu, cuda or cuda:<i>."),
    batch_size: Optional[int] = typer.Option(None, help="Largest batch per forward pass (default 256 on CPU, 8192 on CUDA)."),
    labels_from: Optional[str] = typer.Option(
        None, "--labels-from", help="The classifier under test when it answers with labels only: package.module:name "
        "of a function from a torch batch to labels (or an object with predict_labels). Its decisions are the "
        "failures and the counted queries; --model is then your own network, whose margin sets the levels."),
    confidence: float = CONFIDENCE,
    delta: float = DELTA,
    json_output: bool = JSON_OUTPUT,
    allow_large: bool = ALLOW_LARGE,
) -> None:
    """The probability that your classifier fails on your input under random noise."""
    import warnings

    from scarce.errors import EvaluationError, ScarceError, ScarceWarning
    from scarce.estimators import SubsetSimulation

    try:
        check_report_options(confidence, delta)
        x0, network = _load(model, weights, input_file, shape)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", ScarceWarning)
            result = _run(network, x0, json_output, label=label, failure=_failure(target), noise=noise, scale=scale,
                          clip=_numbers("--clip", clip), seed=seed, device=device, batch_size=batch_size,
                          **_label_only(labels_from),
                          estimator=SubsetSimulation(n_samples=n_samples, level_probability=level_probability_option(level_probability),
                                                     max_queries=max_queries, allow_large=allow_large))
    except (ScarceError, EvaluationError) as exc:  # EvaluationError: the model failed inside the run
        fail(cli_message(exc), exc)
    except OSError as exc:
        fail(describe_os_error(exc, "the files given (--input, --weights) and the model's own files"), exc)
    show_estimate(result, caught, json_output=json_output, confidence=confidence, delta=delta)


def _label_only(labels_from: Optional[str]) -> dict:  # type: ignore[type-arg]
    """The options of a label-only target: the target itself, and the levels on the surrogate's margin."""
    if labels_from is None:
        return {}
    from scarce.applications.vision.loading import label_target

    return {"target": label_target(labels_from), "score": "surrogate_margin"}


def _failure(target: Optional[int]):  # type: ignore[no-untyped-def]
    from scarce.applications.vision.events import Misclassification, Targeted

    return Misclassification() if target is None else Targeted(target)


def _load(model: str, weights: Optional[str], input_file: str, shape: Optional[str]):  # type: ignore[no-untyped-def]
    from scarce.applications.vision.loading import build_model, load_weights, read_input

    check_path_option("--input", input_file)
    check_path_option("--weights", weights)
    network = build_model(model)
    if weights is not None:
        load_weights(network, weights)
    return read_input(input_file, _numbers("--shape", shape, int)), network


def _run(network, x0, quiet: bool, **options):  # type: ignore[no-untyped-def]
    from scarce.applications.vision.api import failure_probability
    from scarce.cli.common import level_progress

    if quiet:
        return failure_probability(network, x0, **options)
    with level_progress(f"{type(network).__name__} on input {tuple(x0.shape)}") as on_level:
        return failure_probability(network, x0, callback=on_level, **options)
