"""One experiment-settings layer: presets as data files, one --set parser, one task-seed rule."""

from __future__ import annotations

import zlib

import numpy as np
import pytest

from scarce.errors import ScarceError
from scarce.experiments.settings import check_table, coerce_setting, load_presets, nest, parse_settings, task_seed


@pytest.mark.parametrize("text, current, value", [
    ("12", 3, 12), ("1e4", 3, 10_000), ("2000.0", 3, 2000), ("0.25", 0.5, 0.25), ("3", 0.5, 3.0),
    ("yes", False, True), ("false", True, False), ("abc", "x", "abc"),
    ("a, b", ("x",), ("a", "b")), ("1,2", (3,), (1, 2)), ("1e-3,0.1", (0.5,), (1e-3, 0.1)),
])
def test_one_set_of_typing_rules(text, current, value):
    out = coerce_setting("k", text, current)
    assert out == value and type(out) is type(value)


@pytest.mark.parametrize("text, current, kind", [
    ("0.5", 3, "an integer"), ("nan", 0.5, "a finite number"), ("inf", 0.5, "a finite number"),
    ("maybe", True, "true or false"), ("1,x", (3,), "a comma-separated list of integers"),
])
def test_a_value_of_the_wrong_type_names_the_key_and_the_type(text, current, kind):
    with pytest.raises(ScarceError, match=rf"--set k={text!r}: k takes a value like .* \({kind}\)"):
        coerce_setting("k", text, current)


def test_parse_settings_checks_names_and_duplicates_and_nests_groups():
    current = {"n_runs": 20, "methods.ss_samples": 2000, "etas": (1e-3,)}
    flat = parse_settings(["n_runs=5", "methods.ss_samples=1e3"], current)
    assert nest(flat) == {"n_runs": 5, "methods": {"ss_samples": 1000}}
    with pytest.raises(ScarceError, match="Did you mean 'n_runs'"):
        parse_settings(["n_run=5"], current)
    with pytest.raises(ScarceError, match="given twice"):
        parse_settings(["n_runs=5", "n_runs=6"], current)


def test_task_seeds_are_the_rule_both_applications_had():
    # vision: [base, stage number, seed index, crc32(method)]; LLM: [base, crc32(cell key)]
    assert task_seed(3, 2, 17, "ss_margin").entropy == [3, 2, 17, zlib.crc32(b"ss_margin")]
    assert task_seed(0, "cell-pc1").entropy == [0, zlib.crc32(b"cell-pc1")]
    assert isinstance(task_seed(0), np.random.SeedSequence)


def test_a_preset_table_is_checked_by_name_type_and_required_keys():
    defaults = {"n_runs": 20, "scale": 0.2, "rulers": ("a",), "head": False}
    assert check_table({"n_runs": 3, "scale": 1, "rulers": ["b"]}, defaults, "p") == \
        {"n_runs": 3, "scale": 1.0, "rulers": ("b",)}
    with pytest.raises(ScarceError, match="Did you mean 'n_runs'"):
        check_table({"n_run": 3}, defaults, "preset 'x'")
    with pytest.raises(ScarceError, match=r"preset 'x': n_runs = '3' \(str\); n_runs takes an integer"):
        check_table({"n_runs": "3"}, defaults, "preset 'x'")
    with pytest.raises(ScarceError, match="head = 1 .* takes true or false"):
        check_table({"head": 1}, defaults, "preset 'x'")
    with pytest.raises(ScarceError, match=r"lacks the required setting\(s\) \['scale'\]"):
        check_table({"n_runs": 3}, defaults, "preset 'x'", required=["scale"])


def test_the_shipped_preset_files_load_and_a_broken_file_is_named(tmp_path, monkeypatch):
    from scarce.applications.llm.sweep import PRESETS as llm
    from scarce.applications.vision.protocol import PRESETS as vision

    assert set(vision) == {"quick", "paper", "tiny"} and set(llm) == {"paper", "quick", "tiny"}
    assert vision["quick"].n_runs == 3 and vision["paper"].classifier == {} and llm["tiny"].percentiles == (75,)
    package = tmp_path / "fakepresets"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "presets.toml").write_text("[a]\nn = 1\n[b\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(ScarceError, match="fakepresets/presets.toml cannot be read"):
        load_presets("fakepresets", "presets.toml", lambda name, table: table)
    (package / "presets.toml").write_text("n = 1\n")
    with pytest.raises(ScarceError, match="is not a preset table"):
        load_presets("fakepresets", "presets.toml", lambda name, table: table)


@pytest.mark.parametrize("app, name, fingerprint", [
    # quick and paper changed on purpose when the boundary ruler joined their rulers (and quick
    # went to 80 training seeds): a run directory of the old configuration is refused, not mixed
    ("vision", "quick", "b9ba127ab905d08c0be5c4c99c530ec71ef99945aac7a32ff5fbc1efb0dd5f91"),
    ("vision", "paper", "6140152c9f39afe4fc78bcd43b8c03726988f4f5a54cc784699bb8ee0428e86b"),
    ("vision", "tiny", "a268b6a75a38bd1c155e35feb006ec59a3821d3d122ee741b88e71c4cbaadf25"),
    # the LLM presets changed on purpose when the fleet's levels were broken inside records
    # (tie_break): a sweep directory made before is refused, and resumes with tie_break=false
    ("llm", "paper", "1d96202d9cd47ccf19d6f41235ce480f96e8a767c58635b5625582ca7d5f69cf"),
    ("llm", "quick", "42113f15054a399101c96dd87543bdcf200b9d6859974e61bd2791459dae6739"),
    ("llm", "tiny", "893a7143db5485294bf63eb1ee0d186c810f37768c753cefe98fc551a8ae67e1"),
    ("llm-plateau", "paper", "81dbed979f7541d7789c9c1dbdcb905731241d924d48e615ccbc3a3bdab41dce"),
    ("llm-plateau", "quick", "45521f148cb5633f2ea67164be057db708b30c948b39c632a26f1e8bc1f6a323"),
    ("llm-plateau", "tiny", "be632bc6647ffd25d416ca439c52fd9865214022aa96a9b48b9e2005ec3f91c9"),
])
def test_presets_read_from_files_are_the_configurations_run_directories_were_made_with(app, name, fingerprint):
    """The fingerprints of the presets (first as Python code defined them before they became data
    files): a run directory made with one still resumes, with the same task seeds and numbers."""
    from dataclasses import replace

    from scarce.applications.llm.sweep import PRESETS as llm
    from scarce.applications.vision.protocol import PRESETS as vision
    from scarce.experiments.store import config_fingerprint

    preset = {"vision": vision, "llm": llm, "llm-plateau": llm}[app][name]
    if app == "llm-plateau":
        preset = replace(preset, tie_break=False)
    assert config_fingerprint(preset.config()) == fingerprint


def test_the_vision_target_acceptance_reaches_the_kernel_and_is_stored_only_when_changed():
    """``methods.target_acceptance`` sets aCS's target in every Subset Simulation of a vision run; at
    0.35 (the engine's default, the behaviour of earlier run directories) it is not stored, so they resume."""
    from scarce.applications.vision.methods import MethodSettings, _estimator
    from scarce.applications.vision.protocol import get_preset, parse_overrides

    assert _estimator("ss_margin", MethodSettings()).kernel.target_acceptance == 0.35
    assert _estimator("scarce:centroid", MethodSettings(target_acceptance=0.5)).kernel.target_acceptance == 0.5
    assert "target_acceptance" not in get_preset("quick").config()["methods"]
    changed = get_preset("quick", **parse_overrides(["methods.target_acceptance=0.5"], "quick"))
    assert changed.config()["methods"]["target_acceptance"] == 0.5


@pytest.mark.parametrize("value", [0.0, 1.0, -0.2, float("nan"), "0.5"])
def test_a_vision_target_acceptance_outside_zero_one_is_refused_by_name(value):
    from scarce.applications.vision.methods import MethodSettings
    from scarce.errors import ScarceError

    with pytest.raises(ScarceError, match="methods.target_acceptance"):
        MethodSettings(target_acceptance=value)
