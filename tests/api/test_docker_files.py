"""docker/: compose, Prometheus and Grafana files parse and point at files and metrics that exist.

PyYAML is used when installed; otherwise a small parser of the YAML subset
these files are written in (block mappings and lists, quoted or plain
scalars, ``{}`` and JSON-style ``[...]``) reads them.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from api.app import make_app
from api.config import Config
from api.state import STATE
from chunkstore.reserve import ReserveStore

DOCKER = Path(__file__).resolve().parents[2] / "docker"
ROOT = DOCKER.parent


# ------------------------------------------------------------------ tiny YAML


def _scalar(text: str) -> Any:
    t = text.strip()
    if t == "{}":
        return {}
    if t.startswith("[") or t.startswith('"'):
        return json.loads(t)
    if t.startswith("'") and t.endswith("'"):
        return t[1:-1].replace("''", "'")
    if t in ("true", "True"):
        return True
    if t in ("false", "False"):
        return False
    if t in ("null", "~", ""):
        return None
    if re.fullmatch(r"-?\d+", t):
        return int(t)
    return t


def _strip_comment(line: str) -> str:
    out, quote = [], None
    for i, c in enumerate(line):
        if quote:
            if c == quote:
                quote = None
        elif c in "\"'":
            quote = c
        elif c == "#" and (i == 0 or line[i - 1] in " \t"):
            break
        out.append(c)
    return "".join(out).rstrip()


def _split_key(text: str) -> tuple[str, str] | None:
    m = re.match(r'^("[^"]*"|[^\s:"\'][^:]*?):(?:\s+(.*)|$)', text)
    if not m:
        return None
    key = m.group(1)
    return (json.loads(key) if key.startswith('"') else key), (m.group(2) or "")


def tiny_yaml(text: str) -> Any:
    lines = [(len(raw) - len(raw.lstrip(" ")), raw.strip()) for raw in map(_strip_comment, text.splitlines())]
    lines = [ln for ln in lines if ln[1]]
    pos = 0

    def block(indent: int) -> Any:
        nonlocal pos
        if lines[pos][1].startswith("- ") or lines[pos][1] == "-":
            out_list: list[Any] = []
            while pos < len(lines) and lines[pos][0] == indent and lines[pos][1].startswith("-"):
                item = lines[pos][1][1:].strip()
                kv = _split_key(item)
                if kv is None:
                    out_list.append(_scalar(item))
                    pos += 1
                    continue
                # "- key: value" opens a mapping whose other keys sit at indent + 2
                lines[pos] = (indent + 2, item)
                out_list.append(mapping(indent + 2))
            return out_list
        return mapping(indent)

    def mapping(indent: int) -> dict[str, Any]:
        nonlocal pos
        out: dict[str, Any] = {}
        while pos < len(lines) and lines[pos][0] == indent and not lines[pos][1].startswith("- "):
            kv = _split_key(lines[pos][1])
            assert kv is not None, f"cannot parse line {lines[pos][1]!r}"
            key, rest = kv
            pos += 1
            if rest:
                out[key] = _scalar(rest)
            elif pos < len(lines) and (lines[pos][0] > indent or lines[pos][1].startswith("- ")):
                out[key] = block(lines[pos][0])
            else:
                out[key] = None
        return out

    result = block(lines[0][0])
    assert pos == len(lines), f"unparsed from line {lines[pos][1]!r}"
    return result


def load_yaml(path: Path) -> Any:
    text = path.read_text()
    try:
        import yaml
    except ImportError:
        return tiny_yaml(text)
    return yaml.safe_load(text)


def test_tiny_yaml_reads_its_subset():
    doc = tiny_yaml(
        'a: 1\nb:\n  c: "x # not a comment"  # a comment\n  d: [1, 2]\nlist:\n  - "p"\n  - k: v\n    k2: true\n'
        "empty: {}\n"
    )
    assert doc == {"a": 1, "b": {"c": "x # not a comment", "d": [1, 2]}, "list": ["p", {"k": "v", "k2": True}],
                   "empty": {}}


# ------------------------------------------------------------------ the files


def test_compose_file():
    compose = load_yaml(DOCKER / "compose.yaml")
    services = compose["services"]
    assert set(services) >= {"chunkstore", "prometheus", "grafana"}
    daemon = services["chunkstore"]
    context = (DOCKER / daemon["build"]["context"]).resolve()
    assert context == ROOT
    assert (context / daemon["build"]["dockerfile"]).is_file()
    assert daemon["environment"]["CHUNKSTORE_HOST"] == "0.0.0.0"
    assert any(v.endswith(":/data") for v in daemon["volumes"])
    named = set(compose["volumes"])
    for name, svc in services.items():
        for vol in svc.get("volumes", []):
            src = vol.split(":")[0]
            if src.startswith("."):
                assert (DOCKER / src).exists(), f"{name}: bind source {src} missing"
            else:
                assert src in named, f"{name}: volume {src} not declared"
        for dep in svc.get("depends_on", []):
            assert dep in services


def test_prometheus_scrapes_the_daemon():
    compose = load_yaml(DOCKER / "compose.yaml")
    port = compose["services"]["chunkstore"]["environment"]["CHUNKSTORE_PORT"]
    prom = load_yaml(DOCKER / "prometheus.yml")
    jobs = {j["job_name"]: j for j in prom["scrape_configs"]}
    job = jobs["chunkstore"]
    assert job["metrics_path"] == "/metrics"
    assert f"chunkstore:{port}" in job["static_configs"][0]["targets"]
    mounts = compose["services"]["prometheus"]["volumes"]
    assert any(m.startswith("./prometheus.yml:/etc/prometheus/prometheus.yml") for m in mounts)
    # the rules are loaded from beside the config, where compose mounts them
    assert prom["rule_files"] == ["alerts.yml"]
    assert any(m.startswith("./alerts.yml:/etc/prometheus/alerts.yml") for m in mounts)


# what the operator's issue asks the dashboard to show, each a words in some panel's title
DASHBOARD_TOPICS = (
    "sample duration against the sampling window", "reserve size against capacity", "storage radius",
    "per proximity bin", "uploads per second", "upload latency", "refused writes", "hash backend",
)


def test_grafana_provisioning_and_dashboard(tmp_path):
    compose = load_yaml(DOCKER / "compose.yaml")
    mounts = dict(m.split(":")[:2] for m in compose["services"]["grafana"]["volumes"] if m.startswith("."))
    ds = load_yaml(DOCKER / "grafana/provisioning/datasources/prometheus.yml")["datasources"][0]
    assert ds["type"] == "prometheus" and ds["url"] == "http://prometheus:9090"
    prov = load_yaml(DOCKER / "grafana/provisioning/dashboards/chunkstore.yml")["providers"][0]
    assert prov["options"]["path"] == mounts["./grafana/dashboards"]
    assert mounts["./grafana/provisioning"] == "/etc/grafana/provisioning"

    dashboards = list((DOCKER / "grafana/dashboards").glob("*.json"))
    assert dashboards
    exposed = exposed_metric_names(tmp_path)
    for path in dashboards:
        dash = json.loads(path.read_text())
        assert dash["uid"] and dash["panels"]
        titles = " | ".join(p["title"].lower() for p in dash["panels"])
        for needed in DASHBOARD_TOPICS:
            assert needed in titles, f"{path.name}: no panel on {needed!r}"
        assert any("chunks_per_second" in t["expr"] for p in dash["panels"] for t in p["targets"])
        assert len({p["id"] for p in dash["panels"]}) == len(dash["panels"])
        for panel in dash["panels"]:
            assert panel["datasource"]["uid"] == ds["uid"]
            assert panel["title"] and panel["description"], panel["id"]
            assert panel["fieldConfig"]["defaults"].get("unit"), f"{panel['title']!r} says no unit"
            assert panel["targets"], panel["title"]
            for target in panel["targets"]:
                for name in re.findall(r"\b((?:bee|chunkstore)_[a-z_]+)", target["expr"]):
                    assert name in exposed, f"{path.name}: panel {panel['title']!r} uses unknown metric {name}"


def exposed_metric_names(tmp_path: Path) -> set[str]:
    """Every series name the daemon's app exposes over a real store once a sample has run."""
    store = ReserveStore(tmp_path / "store")
    try:
        metrics = make_app(store, Config(data_dir=tmp_path))[STATE].metrics
        metrics.record_sample(1.0, None, ok=True)  # the run summary exists from the first sample on
        text = metrics.render().decode()
    finally:
        store.close()
    return {line.split("{")[0].split(" ")[0] for line in text.splitlines() if line and not line.startswith("#")}


def test_dockerfile():
    text = (DOCKER / "Dockerfile").read_text()
    assert re.search(r"^FROM python:3\.11-slim\s*$", text, re.M)
    assert "pip install ." in text
    users = re.findall(r"^USER (\S+)", text, re.M)
    assert users and users[-1] not in ("root", "0")
    assert re.search(r'^VOLUME \["/data"\]', text, re.M)
    assert re.search(r"^HEALTHCHECK .*", text, re.M) and "/health" in text
    # exec-form instructions must be valid JSON arrays, or Docker runs them through a shell as text
    joined = text.replace("\\\n", " ")
    for m in re.finditer(r"^(?:CMD|ENTRYPOINT|HEALTHCHECK .*?CMD) (\[.*\])\s*$", joined, re.M):
        assert isinstance(json.loads(m.group(1)), list)
    hc = re.search(r"^HEALTHCHECK .*?CMD (\[.*\])\s*$", joined, re.M)
    assert hc and "/health" in " ".join(json.loads(hc.group(1)))
    assert 'ENTRYPOINT ["chunkstore", "serve"]' in text
    for src in re.findall(r"^COPY (?!--from)(.+) \S+$", text, re.M):
        for part in src.split():
            assert (ROOT / part).exists(), f"COPY source {part} missing"


@pytest.mark.parametrize("name", ["compose.yaml", "prometheus.yml"])
def test_yaml_files_have_no_tabs(name):
    assert "\t" not in (DOCKER / name).read_text()


def _ignore_patterns(path: Path) -> list[str]:
    return [ln.strip() for ln in path.read_text().splitlines() if ln.strip() and not ln.lstrip().startswith("#")]


def test_every_builder_sends_the_same_small_context():
    """The legacy builder (Debian's docker.io has no buildx) reads only the context's own .dockerignore,
    not docker/Dockerfile.dockerignore: without one at the root it sent the whole checkout, 507 MB with
    .venv and data/ (node.key and demo-owner.key included), to the daemon. Both files list the same
    patterns: everything is left out but what the Dockerfile copies."""
    root = _ignore_patterns(ROOT / ".dockerignore")
    assert root == _ignore_patterns(DOCKER / "Dockerfile.dockerignore")
    assert root[0] == "**"
    text = (DOCKER / "Dockerfile").read_text()
    for src in re.findall(r"^COPY (?!--from)(.+) \S+$", text, re.M):
        for part in src.split():
            assert f"!{part}" in root or f"!{part}/**" in root, f"COPY source {part} is ignored"
