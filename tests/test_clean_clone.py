"""The suite needs nothing outside the repository.

A user's clone has no workplace folders beside it, so every test input must be
tracked in the repository and no tracked file may name a path of this machine.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

# Paths that exist only on some machine: a user's home, a workplace checkout.
MACHINE_PATH = re.compile(rb"(?<![\w.])/(?:work|home/[a-z_][\w-]*|root|Users/[\w.-]+)/[\w.-]+")


def _tracked_files() -> list[Path]:
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("not a git checkout (or git is missing): the tracked files are unknown")
    out = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
    return [ROOT / name for name in out.decode().split("\0") if name and (ROOT / name).is_file()]


def test_no_tracked_file_names_a_machine_path() -> None:
    offenders = []
    for path in _tracked_files():
        if path.name == "package-lock.json" or path.suffix in {".png", ".json"}:
            continue  # lock files and data hold registry URLs and vectors, not paths of ours
        for lineno, line in enumerate(path.read_bytes().splitlines(), 1):
            # The container image's own user home is a path inside the image, not of any machine.
            if MACHINE_PATH.search(line) and b"/home/chunkstore" not in line:
                offenders.append(f"{path.relative_to(ROOT)}:{lineno}: {line.decode(errors='replace').strip()}")
    assert not offenders, "absolute machine paths in tracked files:\n" + "\n".join(offenders)


def test_vector_tests_pass_in_a_copy_with_nothing_beside_it(tmp_path: Path) -> None:
    """Copy the tracked tree into an empty folder and run the tests that read test inputs there."""
    clone = tmp_path / "lonely" / "clone"
    for path in _tracked_files():
        target = clone / path.relative_to(ROOT)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(path, target)
    assert not (clone.parent / "shared").exists()
    readers = sorted(
        str(p.relative_to(clone))
        for p in (clone / "tests").rglob("test_*.py")
        if "load_vector" in p.read_text() and p.name != Path(__file__).name
    )
    assert readers, "no test reads the reference vector: this check would prove nothing"
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST")}
    env["PYTHONPATH"] = str(clone)
    probe = subprocess.run(
        [sys.executable, "-c", "import chunkstore, sampler; print(chunkstore.__file__); print(sampler.__file__)"],
        cwd=clone, env=env, capture_output=True, text=True, check=True,
    )
    assert all(line.startswith(str(clone)) for line in probe.stdout.split()), probe.stdout
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-x", *readers],
        cwd=clone, env=env, capture_output=True, text=True, timeout=600,
    )
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-2000:]
    assert " passed" in run.stdout
