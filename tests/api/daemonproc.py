"""``chunkstore serve`` as a real process on a free port, for tests that talk to it from outside (bee-js,
Prometheus, a browser).

The daemon logs JSON lines on stderr; its ``listening`` line says which port it took.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]


def free_port() -> int:
    """A TCP port free on 127.0.0.1 now (for servers that cannot be told to pick one and report it)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Daemon:
    """``python -m api.cli serve`` on 127.0.0.1 with a free port; ``stop()`` sends SIGTERM."""

    def __init__(self, data_dir: Path, *extra: str, start_timeout: float = 60.0) -> None:
        self.data_dir = data_dir
        self.raw: list[str] = []
        self.listening: dict[str, Any] = {}
        self._up = threading.Event()
        cmd = [sys.executable, "-m", "api.cli", "serve", "--data-dir", str(data_dir), "--port", "0",
               "--host", "127.0.0.1", "--workers", "2", "--log-format", "json", *extra]
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        self.proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        threading.Thread(target=self._read, daemon=True).start()
        deadline = time.monotonic() + start_timeout
        while not self._up.wait(0.05):
            if self.proc.poll() is not None:
                raise AssertionError(f"daemon exited {self.proc.returncode}: {self.raw[-20:]}")
            if time.monotonic() > deadline:
                self.stop()
                raise AssertionError(f"daemon not listening after {start_timeout} s: {self.raw[-20:]}")
        self.port = int(self.listening["port"])
        self.url = f"http://127.0.0.1:{self.port}"

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.raw.append(line.rstrip())
            try:
                rec = json.loads(line)
            except ValueError:
                continue
            if rec.get("msg") == "listening":
                self.listening = rec
                self._up.set()

    def request(
        self, method: str, path: str, body: Any = None, headers: dict[str, str] | None = None, timeout: float = 30
    ) -> tuple[int, bytes]:
        """(status, body); ``body`` is sent as JSON unless it is already bytes."""
        data = body if isinstance(body, bytes) or body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.url + path, data=data, method=method, headers=headers or {})
        try:
            with urllib.request.urlopen(req, timeout=timeout) as r:
                return r.status, r.read()
        except urllib.error.HTTPError as e:
            return e.code, e.read()

    def json(self, path: str) -> Any:
        status, body = self.request("GET", path)
        assert status == 200, (path, status, body[:500])
        return json.loads(body)

    def wait_ready(self, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while self.request("GET", "/readiness")[0] != 200:
            assert self.proc.poll() is None, f"daemon exited {self.proc.returncode}: {self.raw[-20:]}"
            assert time.monotonic() < deadline, f"daemon not ready after {timeout} s: {self.raw[-20:]}"
            time.sleep(0.1)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
