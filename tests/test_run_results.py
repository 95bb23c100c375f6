"""Run directories after a kill: temporary files of killed writes, damaged task files, provenance."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from scarce._atomic import FOREIGN_TEMPORARY_AGE, _host, atomic_write_text
from scarce.experiments.store import CorruptResultWarning, ResultStore


def _dead_pid() -> int:
    child = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True,
                           check=True)
    return int(child.stdout)


def test_temporary_files_of_killed_writes_are_removed_when_the_run_resumes(tmp_path):
    store = ResultStore(tmp_path / "run", {"name": "x"})
    store.save("a", {"value": 1})
    tasks = tmp_path / "run" / "tasks"
    dead = tasks / f".b.json.w-{_host()}-{_dead_pid()}.x1.tmp"
    live = tasks / f".c.json.w-{_host()}-{os.getpid()}.x2.tmp"
    foreign_new = tasks / ".d.json.w-otherhost-12.x3.tmp"
    foreign_old = tasks / ".e.json.w-otherhost-13.x4.tmp"
    unrelated = tasks / ".notes.tmp"
    for path in (dead, live, foreign_new, foreign_old, unrelated):
        path.write_text("partial")
    old = time.time() - FOREIGN_TEMPORARY_AGE - 60
    os.utime(foreign_old, (old, old))
    with pytest.warns(CorruptResultWarning, match="removed 2 temporary file"):
        reopened = ResultStore.open(tmp_path / "run")
    assert reopened.removed_temporaries == 2
    assert not dead.exists() and not foreign_old.exists()
    assert live.exists() and foreign_new.exists() and unrelated.exists()  # a live writer's, or not ours
    assert reopened.load("a") == {"value": 1}


def test_an_atomic_write_names_its_writer_and_leaves_no_temporary_file(tmp_path):
    atomic_write_text(tmp_path / "f.json", "{}")
    assert [p.name for p in tmp_path.iterdir()] == ["f.json"]
