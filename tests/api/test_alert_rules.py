"""docker/alerts.yml: the rules load, their unit tests (docker/alerts.test.yml) pass under ``promtool test
rules``, every alert has a case where it fires and one where it stays silent, and each of those cases bites:
the same tests run against a copy of the rules where that alert never fires, and against one where it always
fires (with only its silent cases), must fail.

promtool ships with Debian's ``prometheus`` package (``.ci/run`` installs it); without it the promtool tests
skip with that reason.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

DOCKER = Path(__file__).resolve().parents[2] / "docker"
RULES = DOCKER / "alerts.yml"
RULE_TESTS = DOCKER / "alerts.test.yml"
PROMTOOL = shutil.which("promtool")

needs_promtool = pytest.mark.skipif(
    PROMTOOL is None, reason="promtool is not on PATH: install Debian's `prometheus` package (.ci/run does)"
)

SEVERITIES = {"warning", "critical"}


def load_rules() -> list[dict[str, Any]]:
    doc = yaml.safe_load(RULES.read_text())
    return [rule for group in doc["groups"] for rule in group["rules"]]


def alert_names() -> list[str]:
    return [r["alert"] for r in load_rules() if "alert" in r]


def rule_cases() -> list[dict[str, Any]]:
    doc = yaml.safe_load(RULE_TESTS.read_text())
    return [case for test in doc["tests"] for case in test.get("alert_rule_test", [])]


def promtool(*args: str, cwd: Path = DOCKER) -> subprocess.CompletedProcess[str]:
    assert PROMTOOL is not None
    # one stream: promtool writes each file's "Unit Testing" line to stdout and its failures to stderr
    return subprocess.run([PROMTOOL, *args], cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          timeout=120)


def show(capsys: pytest.CaptureFixture[str], title: str, proc: subprocess.CompletedProcess[str]) -> None:
    """Print a promtool run into the test log itself (CI shows these lines), not only on failure."""
    with capsys.disabled():
        print(f"\n--- {title} (exit {proc.returncode})")
        for line in proc.stdout.splitlines():
            print(f"    {line}")


def test_rules_are_well_formed() -> None:
    rules = load_rules()
    names = alert_names()
    assert len(names) == len(set(names)), "alert names must be unique"
    assert len(names) == len(rules), "only alerting rules here; recording rules would need their own tests"
    for rule in rules:
        assert rule["labels"]["severity"] in SEVERITIES, rule["alert"]
        assert set(rule["annotations"]) == {"summary", "description"}, rule["alert"]
        assert rule["alert"].startswith("Chunkstore")


def test_issue_topics_are_covered() -> None:
    """The alerts the operator's issue asks for, by the series each must watch."""
    by_name = {r["alert"]: r["expr"] for r in load_rules()}
    wanted = {
        "ChunkstoreSampleSlow": "chunkstore_sample_window_seconds",
        "ChunkstoreSampleEstimateSlow": "chunkstore_sample_full_reserve_estimate_seconds",
        "ChunkstoreSampleFailing": 'status="failure"',
        "ChunkstoreWritesRefusedDiskFull": "chunkstore_writes_refused_total",
        "ChunkstoreReserveOverCapacity": "chunkstore_reserve_capacity",
        "ChunkstoreStorageRadiusRising": "bee_localstore_storage_radius",
        "ChunkstoreHashBackendNotAccelerated": "chunkstore_hash_backend{",
        "ChunkstoreNotReady": "chunkstore_ready",
    }
    for name, needle in wanted.items():
        assert needle in by_name[name], (name, by_name[name])


def test_every_alert_has_a_firing_and_a_silent_case() -> None:
    cases = rule_cases()
    for name in alert_names():
        mine = [c for c in cases if c["alertname"] == name]
        assert any(c.get("exp_alerts") for c in mine), f"{name}: no case where it fires"
        assert any(not c.get("exp_alerts") for c in mine), f"{name}: no case where it stays silent"
    unknown = {c["alertname"] for c in cases} - set(alert_names())
    assert not unknown, f"cases for alerts that do not exist: {unknown}"


@needs_promtool
def test_promtool_checks_the_rules(capsys: pytest.CaptureFixture[str]) -> None:
    proc = promtool("check", "rules", RULES.name)
    show(capsys, f"promtool check rules {RULES.name}", proc)
    assert proc.returncode == 0
    assert re.search(rf"SUCCESS: {len(load_rules())} rules found", proc.stdout)


@needs_promtool
def test_promtool_rule_unit_tests_pass(capsys: pytest.CaptureFixture[str]) -> None:
    proc = promtool("test", "rules", RULE_TESTS.name)
    show(capsys, f"promtool test rules {RULE_TESTS.name}", proc)
    assert proc.returncode == 0
    assert "SUCCESS" in proc.stdout


def _mutant(tmp: Path, tag: str, alert: str, expr: str, silent_only: bool) -> Path:
    """A rules copy where ``alert`` has ``expr``, and a test file reading it with that alert's cases (only
    the silent ones when ``silent_only``); returns the test file."""
    rules = yaml.safe_load(RULES.read_text())
    for group in rules["groups"]:
        for rule in group["rules"]:
            if rule.get("alert") == alert:
                rule["expr"] = expr
    tests = yaml.safe_load(RULE_TESTS.read_text())
    rules_file = tmp / f"{tag}.rules.yml"
    tests["rule_files"] = [rules_file.name]
    kept = []
    for test in tests["tests"]:
        cases = [c for c in test.get("alert_rule_test", [])
                 if c["alertname"] == alert and not (silent_only and c.get("exp_alerts"))]
        if cases:
            kept.append({**test, "alert_rule_test": cases})
    tests["tests"] = kept
    rules_file.write_text(yaml.safe_dump(rules, sort_keys=False))
    test_file = tmp / f"{tag}.test.yml"
    test_file.write_text(yaml.safe_dump(tests, sort_keys=False))
    return test_file


def _results(output: str) -> dict[str, bool]:
    """promtool's verdict per test file: ``Unit Testing:  FILE`` followed by SUCCESS or FAILED."""
    verdicts: dict[str, bool] = {}
    current = None
    for line in output.splitlines():
        m = re.match(r"\s*Unit Testing:\s+(\S+)", line)
        if m:
            current = Path(m.group(1)).name
        elif current and line.strip() in ("SUCCESS", "FAILED:"):
            verdicts.setdefault(current, line.strip() == "SUCCESS")
    return verdicts


@needs_promtool
def test_each_case_bites(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Per alert: never firing must fail its firing cases; always firing must fail its silent cases.

    The unmutated rules with only the silent cases must pass, so a failure of the mutant is the
    mutation's doing. All files go to one promtool run (it takes several test files).
    """
    files: dict[str, tuple[str, bool]] = {}  # test file name -> (alert, promtool must pass)
    for alert in alert_names():
        original = next(r["expr"] for r in load_rules() if r.get("alert") == alert)
        for tag, expr, silent_only, must_pass in (
            ("never", "vector(1) == 0", False, False),
            ("always", "vector(1)", True, False),
            ("control", original, True, True),
        ):
            f = _mutant(tmp_path, f"{alert}-{tag}", alert, expr, silent_only)
            files[f.name] = (alert, must_pass)
    proc = promtool("test", "rules", *sorted(files), cwd=tmp_path)
    verdicts = _results(proc.stdout)
    assert set(verdicts) == set(files), proc.stdout[-3000:]
    wrong = [name for name, (_, must_pass) in files.items() if verdicts[name] is not must_pass]
    with capsys.disabled():
        print(f"\n--- promtool test rules on {len(files)} mutants: {len(files) - len(wrong)} as expected")
    assert not wrong, f"mutants with the wrong verdict: {wrong}"
