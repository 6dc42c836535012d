"""swarm-cli 3.4.0, the operator's own client, as a test tool: find the prebuilt, install it, run commands.

The prebuilt is not on the package registry and not in this repository: it
sits beside the checkout, at ``../shared/tools/swarm-cli`` relative to the
repository root, or wherever ``SWARM_CLI_DIR`` points (a worktree elsewhere,
a CI cache). Its folder stays read-only: unless it already holds its
runtime dependencies, they are installed into a temporary copy (``npm ci
--omit=dev --ignore-scripts``, as its README says). ``locate()`` says why the
tool cannot be used, for the skip reason.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
ENV_DIR = "SWARM_CLI_DIR"
DEFAULT_DIR = ROOT.parent / "shared" / "tools" / "swarm-cli"
ENTRY = Path("dist") / "src" / "index.js"
VERSION = "3.4.0"


def locate() -> tuple[Path | None, str]:
    """(the prebuilt's folder, "") or (None, why it cannot be used)."""
    node = shutil.which("node")
    npm = shutil.which("npm")
    if node is None or npm is None:
        return None, "node and npm are needed to run swarm-cli and install its dependencies"
    configured = os.environ.get(ENV_DIR)
    folder = Path(configured) if configured else DEFAULT_DIR
    where = f"{ENV_DIR}={configured}" if configured else f"{DEFAULT_DIR} (set {ENV_DIR} to point elsewhere)"
    if not (folder / ENTRY).is_file() or not (folder / "package.json").is_file():
        return None, f"swarm-cli {VERSION} prebuilt not found at {where}"
    return folder, ""


def has_dependencies(folder: Path) -> bool:
    """Whether ``folder`` already holds swarm-cli's runtime dependencies (bee-js among them)."""
    return (folder / "node_modules" / "@ethersphere" / "bee-js" / "package.json").is_file()


def install(source: Path, into: Path, timeout: float = 300) -> Path:
    """A folder to run swarm-cli from: ``source`` itself when it holds its dependencies, else a copy of it
    under ``into`` with them installed. Raises ``RuntimeError`` (npm's own words) when npm cannot install them."""
    if has_dependencies(source):
        return source
    target = into / "swarm-cli"
    shutil.copytree(source, target, ignore=shutil.ignore_patterns("node_modules"))
    proc = subprocess.run(
        ["npm", "ci", "--omit=dev", "--ignore-scripts", "--no-audit", "--no-fund", "--loglevel=error", "--prefix", str(target)],
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"npm ci for swarm-cli failed ({proc.returncode}): {proc.stderr[-2000:]}")
    return target


@dataclass(frozen=True)
class Run:
    """One swarm-cli command as it ran."""

    args: list[str]
    code: int
    stdout: str
    stderr: str

    def transcript(self) -> str:
        out = [f"$ swarm-cli {' '.join(self.args)}", f"[exit {self.code}]"]
        for label, text in (("stdout", self.stdout), ("stderr", self.stderr)):
            if text.strip():
                out.append(f"--- {label}")
                out.append(text.rstrip())
        return "\n".join(out)


class SwarmCli:
    """Runs the installed copy against one daemon, with its own config folder (identities live there)."""

    def __init__(self, installed: Path, api_url: str, config_folder: Path) -> None:
        self.entry = installed / ENTRY
        self.api_url = api_url
        self.config_folder = config_folder
        self.runs: list[Run] = []

    def __call__(self, *args: str, timeout: float = 120, cwd: Path | None = None) -> Run:
        argv = [*args, "--bee-api-url", self.api_url, "--config-folder", str(self.config_folder), "--yes"]
        env = {**os.environ, "NO_COLOR": "1", "FORCE_COLOR": "0"}
        proc = subprocess.run(
            [shutil.which("node") or "node", str(self.entry), *argv],
            capture_output=True,
            text=True,
            timeout=timeout,
            cwd=cwd,
            env=env,
            stdin=subprocess.DEVNULL,
        )
        run = Run(list(args), proc.returncode, proc.stdout, proc.stderr)
        self.runs.append(run)
        return run

    def transcript(self) -> str:
        return "\n\n".join(r.transcript() for r in self.runs)
