"""Every line the daemon writes on stderr is a log line of its format, its sampler's processes included."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from api.logs import JsonFormatter
from chunkstore.swarm import workerlog
from tests.api.daemonproc import ROOT, Daemon


def test_the_sampler_fork_server_logs_in_the_daemons_format(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """The sampler's fork server and workers had no log handler: their warnings (here the fork server's, at
    import, about a bad CHUNKSTORE_SAMPLE_FILE_ORDER; a read-only numba cache in a hardened container is
    another) reached stderr as bare messages between the daemon's JSON lines. Now they are JSON lines too."""
    monkeypatch.setenv("CHUNKSTORE_SAMPLE_FILE_ORDER", "bogus")
    daemon = Daemon(tmp_path / "store", "--demo", "--demo-chunks", "200")
    try:
        daemon.wait_ready()
        status, body = daemon.request("GET", "/rchash/0/5a/01", timeout=120)
        assert status == 200, body[:300]
    finally:
        daemon.stop()
    time.sleep(0.2)  # the reader thread has the last lines
    records = []
    for line in daemon.raw:
        try:
            records.append(json.loads(line))
        except ValueError:
            pytest.fail(f"not a JSON log line: {line!r}")
    warnings = [r for r in records if r.get("logger") == "sampler.fileorder"]
    assert warnings and warnings[0]["level"] == "warning" and "'bogus'" in warnings[0]["msg"], records[-10:]


def test_workerlog_carries_the_formatter_and_level(monkeypatch: pytest.MonkeyPatch):
    root = logging.getLogger()
    saved_handlers, saved_level = list(root.handlers), root.level
    try:
        handler = logging.StreamHandler()
        handler.setFormatter(JsonFormatter())
        root.handlers[:] = [handler]
        root.setLevel(logging.WARNING)
        setup = workerlog.describe()
        root.handlers[:] = []
        root.setLevel(logging.DEBUG)
        assert workerlog.install(setup)
        assert isinstance(root.handlers[0].formatter, JsonFormatter) and root.level == logging.WARNING
        assert not workerlog.install(None) and not workerlog.install("not base64 pickle")
    finally:
        root.handlers[:] = saved_handlers
        root.setLevel(saved_level)


def test_workerlog_is_imported_before_anything_that_logs_at_import():
    """The fork server's first preload must set logging up before the kernels are imported (numba warns at
    import when its cache is read-only): importing it, package __init__s included, loads none of them."""
    code = "import sys, chunkstore.swarm.workerlog; print(sorted(m for m in ('numba', 'sampler', 'numpy') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=60,
                         env={**os.environ, "PYTHONPATH": str(ROOT)})  # fmt: skip
    assert out.stdout.strip() == "[]", out.stdout + out.stderr
