"""Headless Chromium driven over the DevTools protocol (aiohttp's websocket client; no browser library).

``Browser`` starts Debian's chromium with a fresh profile on a free debugging port, opens one page and
records every console error, uncaught exception and error log entry the page produces.
"""

from __future__ import annotations

import asyncio
import base64
import itertools
import json
import re
import shutil
import subprocess
import threading
from pathlib import Path
from typing import Any

import aiohttp

CHROMIUM = next((p for p in map(shutil.which, ("chromium", "chromium-browser", "google-chrome")) if p), None)
# Running as root (CI) needs --no-sandbox; the network here is closed, so nothing may phone home.
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-default-apps", "--disable-extensions", "--remote-debugging-port=0", "--remote-allow-origins=*"]


class Browser:
    def __init__(self, profile: Path) -> None:
        assert CHROMIUM is not None
        self.proc = subprocess.Popen([CHROMIUM, *FLAGS, f"--user-data-dir={profile}", "about:blank"],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        self.stderr: list[str] = []
        self._endpoint: str | None = None
        self._found = threading.Event()
        threading.Thread(target=self._read, daemon=True).start()
        self.errors: list[str] = []  # console errors, exceptions and error log entries, as text
        self._ids = itertools.count(1)
        self._pending: dict[int, asyncio.Future[Any]] = {}
        self._events: dict[str, list[asyncio.Future[Any]]] = {}
        self._session: aiohttp.ClientSession | None = None
        self._ws: aiohttp.ClientWebSocketResponse | None = None
        self._reader: asyncio.Task[None] | None = None

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.stderr.append(line.rstrip())
            m = re.search(r"DevTools listening on (ws://\S+)", line)
            if m:
                self._endpoint = m.group(1)
                self._found.set()

    async def open(self, timeout: float = 30) -> None:
        """Wait for the debugging endpoint and attach to the blank page."""
        loop = asyncio.get_running_loop()
        found = await loop.run_in_executor(None, self._found.wait, timeout)
        assert found and self._endpoint, f"chromium printed no DevTools endpoint: {self.stderr[-20:]}"
        http = "http://" + self._endpoint.split("/")[2]
        self._session = aiohttp.ClientSession()
        async with self._session.get(http + "/json/list") as r:
            targets = await r.json(content_type=None)
        page = next(t for t in targets if t["type"] == "page")
        self._ws = await self._session.ws_connect(page["webSocketDebuggerUrl"], max_msg_size=0)
        self._reader = asyncio.create_task(self._dispatch())
        for domain in ("Runtime", "Log", "Page"):
            await self.send(f"{domain}.enable")

    async def _dispatch(self) -> None:
        assert self._ws is not None
        async for msg in self._ws:
            if msg.type != aiohttp.WSMsgType.TEXT:
                continue
            data = json.loads(msg.data)
            if "id" in data:
                fut = self._pending.pop(data["id"], None)
                if fut is not None and not fut.done():
                    if "error" in data:
                        fut.set_exception(RuntimeError(f"DevTools error: {data['error']}"))
                    else:
                        fut.set_result(data.get("result", {}))
                continue
            method, params = data.get("method", ""), data.get("params", {})
            self._note(method, params)
            for fut in self._events.pop(method, []):
                if not fut.done():
                    fut.set_result(params)

    def _note(self, method: str, params: dict[str, Any]) -> None:
        if method == "Runtime.exceptionThrown":
            d = params["exceptionDetails"]
            self.errors.append(f"exception: {d.get('exception', {}).get('description') or d.get('text')}")
        elif method == "Runtime.consoleAPICalled" and params["type"] in ("error", "assert"):
            args = " ".join(str(a.get("value", a.get("description", ""))) for a in params["args"])
            self.errors.append(f"console.{params['type']}: {args}")
        elif method == "Log.entryAdded" and params["entry"]["level"] == "error":
            e = params["entry"]
            self.errors.append(f"log ({e.get('source')}): {e.get('text')} {e.get('url', '')}".rstrip())

    async def send(self, method: str, **params: Any) -> Any:
        assert self._ws is not None
        msg_id = next(self._ids)
        fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._pending[msg_id] = fut
        await self._ws.send_str(json.dumps({"id": msg_id, "method": method, "params": params}))
        return await asyncio.wait_for(fut, 30)

    def event(self, method: str) -> asyncio.Future[Any]:
        fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._events.setdefault(method, []).append(fut)
        return fut

    async def navigate(self, url: str, timeout: float = 30) -> None:
        loaded = self.event("Page.loadEventFired")
        result = await self.send("Page.navigate", url=url)
        assert not result.get("errorText"), result
        await asyncio.wait_for(loaded, timeout)

    async def evaluate(self, expression: str) -> Any:
        result = await self.send("Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True)
        assert "exceptionDetails" not in result, result["exceptionDetails"]
        return result["result"].get("value")

    async def wait_until(self, expression: str, timeout: float = 20) -> Any:
        """Poll a JavaScript expression until it is truthy; returns its value."""
        deadline = asyncio.get_running_loop().time() + timeout
        while True:
            value = await self.evaluate(expression)
            if value:
                return value
            assert asyncio.get_running_loop().time() < deadline, f"never true: {expression}"
            await asyncio.sleep(0.1)

    async def screenshot(self, path: Path, width: int = 1280, height: int = 1000) -> None:
        await self.send("Emulation.setDeviceMetricsOverride", width=width, height=height, deviceScaleFactor=1,
                        mobile=False)
        shot = await self.send("Page.captureScreenshot", format="png", captureBeyondViewport=True)
        path.write_bytes(base64.b64decode(shot["data"]))

    async def close(self) -> None:
        if self._reader is not None:
            self._reader.cancel()
        if self._ws is not None:
            await self._ws.close()
        if self._session is not None:
            await self._session.close()
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
