"""The bee-js drivers in ``tests/js`` run against a daemon: where node and bee-js are, the skip marks, one runner.

Every driver prints one JSON line of results last and exits 0, or prints
``{"ok": false, "step", "error", "stack"}`` and exits 1; a driver that
logs its calls puts them in ``calls`` (see ``transcript``).
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.api.daemonproc import Daemon

ROOT = Path(__file__).resolve().parents[2]
JS_DIR = ROOT / "tests" / "js"
NODE = shutil.which("node")


def requires_bee_js(*packages: str) -> list[pytest.MarkDecorator]:
    """Skip marks for a test that needs node and the given packages of ``tests/js/node_modules``."""
    wanted = packages or ("@ethersphere/bee-js",)
    return [
        pytest.mark.skipif(NODE is None, reason="node is not on PATH; the bee-js tests need Node.js >= 18"),
        pytest.mark.skipif(
            not all((JS_DIR / "node_modules" / p).is_dir() for p in wanted),
            reason="bee-js is not installed: run `npm ci --prefix tests/js`",
        ),
    ]


def transcript(script: str, result: dict[str, Any], code: int) -> str:
    """Each bee-js call the driver made, in order: what it returned, or the error it threw."""
    out = [f"$ node tests/js/{script}  (bee-js {result.get('client', {}).get('version')})"]
    for c in result.get("calls", []):
        if c["ok"]:
            out.append(f"{c['call']}\n    -> {c['returned']}")
        else:
            e = c["error"]
            body = json.dumps(e.get("responseBody")) if "responseBody" in e else e.get("message")
            label = "expected error" if c.get("expected") else "ERROR"
            out.append(f"{c['call']}\n    -> {label} {e.get('status', '')}: {body}")
    out.append(f"[driver exit {code}]")
    return "\n".join(out)


def run_driver(script: str, d: Daemon, *args: str, timeout: float = 240) -> dict[str, Any]:
    """Run ``tests/js/<script>`` against ``d`` and return its result; a failed step fails the test with
    the driver's error, its stderr and the daemon's log tail."""
    assert NODE is not None
    proc = subprocess.run([NODE, str(JS_DIR / script), "--url", d.url, *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=timeout)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    assert lines, f"driver printed no JSON (exit {proc.returncode}): {proc.stdout[-2000:]} {proc.stderr[-2000:]}"
    result: dict[str, Any] = json.loads(lines[-1])
    if "calls" in result:
        print("\n" + transcript(script, result, proc.returncode))  # pytest -s shows it
    assert proc.returncode == 0 and result.get("ok"), (
        f"bee-js failed at step {result.get('step')!r}: {json.dumps(result.get('error'), indent=1)}\n"
        f"{result.get('stack', '')}\nstderr: {proc.stderr[-2000:]}\ndaemon log tail: {d.raw[-15:]}"
    )
    return result
