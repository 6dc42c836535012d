"""A real Prometheus scrapes a real daemon with docker/prometheus.yml and evaluates docker/alerts.yml; every
series the Grafana dashboard and the alert rules select must then hold data.

The daemon runs with a small demo reserve; the test uploads chunks over HTTP (stored, duplicate, rejected)
and runs reserve samples, so counters, histograms and run summaries all move while Prometheus watches.
Then it asks Prometheus's HTTP API for each selector found in a panel query or a rule, for each panel query
as written, and for the rules' health. A metric renamed in the code but not in docker/ fails here.

Prometheus comes from Debian's ``prometheus`` package (``.ci/run`` installs it); without the binary the
scrape test skips with that reason. The config is docker/prometheus.yml with only the target, the
intervals (1 s, so the test takes seconds) and the rule file's path rewritten.
"""

from __future__ import annotations

import copy
import json
import math
import os
import re
import shutil
import subprocess
import time
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.api.daemonproc import Daemon, free_port
from tests.api.helpers import Uploader

DOCKER = Path(__file__).resolve().parents[2] / "docker"
CONFIG = DOCKER / "prometheus.yml"
RULES = DOCKER / "alerts.yml"
DASHBOARDS = sorted((DOCKER / "grafana" / "dashboards").glob("*.json"))
PROMETHEUS = shutil.which("prometheus")

# A metric name of this project (the reference node's bee_* or this daemon's chunkstore_*) or Prometheus's
# own `up`, with the label matchers that follow it. No label in these files has such a name, so what
# `by (...)` or `on (...)` lists is never taken for a metric.
SELECTOR = re.compile(r"\b((?:bee|chunkstore)_[A-Za-z0-9_:]+|up)\b\s*(\{[^}]*\})?")


def selectors(expr: str) -> list[str]:
    """The series selectors of a PromQL expression, matchers included."""
    return [m.group(1) + (m.group(2) or "") for m in SELECTOR.finditer(expr)]


def panel_queries() -> list[tuple[str, str]]:
    """(dashboard: panel title, expr) for every target of every panel."""
    out = []
    for path in DASHBOARDS:
        for panel in json.loads(path.read_text())["panels"]:
            for target in panel.get("targets", []):
                out.append((f"{path.name}: {panel['title']}", target["expr"]))
    return out


def rule_queries() -> list[tuple[str, str]]:
    doc = yaml.safe_load(RULES.read_text())
    return [(rule.get("alert") or rule["record"], rule["expr"]) for g in doc["groups"] for rule in g["rules"]]


def config_for_test(target: str, interval: str, rules: Path) -> dict[str, Any]:
    """docker/prometheus.yml with the target, the intervals and the rule file's path rewritten; jobs, paths
    and relabelings stay as written."""
    cfg = copy.deepcopy(yaml.safe_load(CONFIG.read_text()))
    cfg["global"].update({"scrape_interval": interval, "evaluation_interval": interval, "scrape_timeout": interval})
    assert [Path(f).name for f in cfg["rule_files"]] == [rules.name], "the docker config must load alerts.yml"
    cfg["rule_files"] = [str(rules)]
    for job in cfg["scrape_configs"]:
        job["static_configs"] = [{"targets": [target]}]
    return cfg


def test_selectors_are_found() -> None:
    expr = ('histogram_quantile(0.9, sum by (le, route) (rate(chunkstore_http_request_duration_seconds_bucket'
            '{method="POST"}[5m]))) / ignoring(metric) bee_localstore_storage_radius and on(job, instance) up')
    assert selectors(expr) == [
        'chunkstore_http_request_duration_seconds_bucket{method="POST"}', "bee_localstore_storage_radius", "up"]


def test_every_panel_and_rule_has_a_selector() -> None:
    for where, expr in panel_queries() + rule_queries():
        assert selectors(expr), f"{where}: no series of this project in {expr!r}"


def test_config_rewrite_keeps_jobs_and_relabelings(tmp_path: Path) -> None:
    original = yaml.safe_load(CONFIG.read_text())
    cfg = config_for_test("127.0.0.1:9", "1s", RULES)
    assert [j["job_name"] for j in cfg["scrape_configs"]] == [j["job_name"] for j in original["scrape_configs"]]
    for new, old in zip(cfg["scrape_configs"], original["scrape_configs"], strict=True):
        assert {k: v for k, v in new.items() if k != "static_configs"} == \
            {k: v for k, v in old.items() if k != "static_configs"}
        assert new["static_configs"] == [{"targets": ["127.0.0.1:9"]}]


# ---------------------------------------------------------------- the real thing


class Prometheus:
    def __init__(self, tmp: Path, config: dict[str, Any]) -> None:
        assert PROMETHEUS is not None
        cfg_file = tmp / "prometheus.yml"
        cfg_file.write_text(json.dumps(config))  # JSON is YAML
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = open(tmp / "prometheus.log", "w")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(
            [PROMETHEUS, f"--config.file={cfg_file}", f"--storage.tsdb.path={tmp / 'tsdb'}",
             f"--web.listen-address=127.0.0.1:{self.port}", "--log.level=warn"],
            stdout=self.log, stderr=subprocess.STDOUT,
        )
        self.log_path = tmp / "prometheus.log"
        deadline = time.monotonic() + 30
        while True:
            assert self.proc.poll() is None, f"prometheus exited: {self.log_path.read_text()[-2000:]}"
            try:
                with urllib.request.urlopen(self.url + "/-/ready", timeout=2) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            assert time.monotonic() < deadline, f"prometheus not ready: {self.log_path.read_text()[-2000:]}"
            time.sleep(0.2)

    def api(self, path: str, **params: str) -> Any:
        url = f"{self.url}/api/v1/{path}" + ("?" + urllib.parse.urlencode(params) if params else "")
        with urllib.request.urlopen(url, timeout=10) as r:
            body = json.loads(r.read())
        assert body["status"] == "success", body
        return body["data"]

    def query(self, expr: str) -> list[dict[str, Any]]:
        data = self.api("query", query=expr)
        assert data["resultType"] == "vector", (expr, data["resultType"])
        return data["result"]

    def value(self, expr: str) -> float | None:
        result = self.query(expr)
        return float(result[0]["value"][1]) if result else None

    def wait_for(self, expr: str, ok: Any, timeout: float = 30) -> None:
        deadline = time.monotonic() + timeout
        while True:
            v = self.value(expr)
            if v is not None and ok(v):
                return
            assert time.monotonic() < deadline, f"{expr} is {v} after {timeout} s"
            time.sleep(0.25)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()


def exercise(d: Daemon) -> None:
    """Uploads of every outcome and a few samples, so every counter, histogram and summary moves."""
    up = Uploader(seed=os.urandom(8))
    status, body = d.request("POST", "/batches", up.batch_json())
    assert status == 201, body
    stamp_header = "swarm-postage-stamp"
    for _ in range(40):
        _, data, stamp = up.cac()
        assert d.request("POST", "/chunks", data, {stamp_header: stamp.hex()})[0] == 201
    for _ in range(4):
        soc, stamp = up.soc()
        assert d.request("POST", "/chunks", soc.data, {stamp_header: stamp.hex()})[0] == 201
    _, data, stamp = up.cac(b"the same chunk twice")
    assert d.request("POST", "/chunks", data, {stamp_header: stamp.hex()})[0] == 201
    assert d.request("POST", "/chunks", data, {stamp_header: stamp.hex()})[0] == 201  # a duplicate
    assert d.request("POST", "/chunks", data, {stamp_header: up.stamp(os.urandom(32)).hex()})[0] == 400  # rejected
    for path in ("/rchash/0/aa/bb", "/rchash/1/5a/01?verbose=true", "/rchash/0/01/02"):
        status, body = d.request("GET", path, timeout=120)
        assert status == 200, (path, body[:300])


@pytest.mark.skipif(PROMETHEUS is None, reason="prometheus is not on PATH: install Debian's `prometheus` package "
                                               "(.ci/run does)")
def test_prometheus_scrapes_every_series_the_dashboard_and_rules_use(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    daemon = Daemon(tmp_path / "data", "--demo", "--demo-chunks", "300")
    prom = None
    lines: list[str] = []
    try:
        daemon.wait_ready()
        prom = Prometheus(tmp_path, config_for_test(f"127.0.0.1:{daemon.port}", "1s", RULES))
        prom.wait_for('up{job="chunkstore"}', lambda v: v == 1)
        exercise(daemon)
        prom.wait_for('chunkstore_chunk_puts_total{outcome="stored"}', lambda v: v >= 45)
        prom.wait_for('bee_localstore_reserve_sample_duration_seconds_count{status="success"}', lambda v: v >= 3)
        time.sleep(3)  # a few more scrapes, so every rate() window holds the change

        missing = []
        wanted = sorted({s for _, e in panel_queries() + rule_queries() for s in selectors(e)})
        for sel in wanted:
            result = prom.query(sel)
            lines.append(f"series {sel}: {len(result)} series")
            if not result:
                missing.append(sel)
        empty = []
        for where, expr in panel_queries():
            result = prom.query(expr)
            values = [float(r["value"][1]) for r in result]
            shown = ", ".join(f"{v:.6g}" for v in values[:4]) + (" ..." if len(values) > 4 else "")
            lines.append(f"panel {where} | {expr} -> {len(values)} series [{shown}]")
            if not any(math.isfinite(v) for v in values):
                empty.append(f"{where}: {expr}")
        # the rules: all loaded from the docker file, all evaluated without error
        deadline = time.monotonic() + 15
        while True:
            rules = [r for g in prom.api("rules")["groups"] for r in g["rules"]]
            if all(r["health"] == "ok" for r in rules) or time.monotonic() > deadline:
                break
            time.sleep(0.5)
        for r in rules:
            lines.append(f"rule {r['name']}: health {r['health']}, state {r.get('state')}, "
                         f"{len(r.get('alerts', []))} alerts")
        targets = prom.api("targets")["activeTargets"]
    finally:
        with capsys.disabled():
            print("\n--- Prometheus queries against the running daemon")
            for line in lines:
                print(f"    {line}")
        if prom is not None:
            prom.stop()
        daemon.stop()

    assert [(t["labels"]["job"], t["health"]) for t in targets] == [("chunkstore", "up")]
    assert sorted(r["name"] for r in rules) == sorted(name for name, _ in rule_queries())
    bad = [(r["name"], r["health"], r.get("lastError")) for r in rules if r["health"] != "ok"]
    assert not bad, bad
    assert not missing, f"series the dashboard or the rules select that Prometheus has no data for: {missing}"
    assert not empty, f"panel queries without a finite value: {empty}"
