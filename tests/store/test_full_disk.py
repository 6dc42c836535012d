"""A really full disk: a small tmpfs in a private mount namespace (tests/store/fullhelpers.py), no root needed.

tmpfs reports a full disk both ways LMDB can meet it: a short write (LMDB's
EIO) and ENOSPC. The scenarios themselves are in tests/store/fullfs_child.py; each
assertion here names what the issue asks for.
"""

from __future__ import annotations

import errno

import pytest

from tests.store.fullhelpers import run_in_small_fs, small_fs_unavailable

_why_not = small_fs_unavailable()
pytestmark = pytest.mark.skipif(_why_not is not None, reason=_why_not or "")

JSON_CT = "application/json; charset=utf-8"


def test_store_on_a_full_disk_refuses_whole_writes_and_recovers(tmp_path):
    r = run_in_small_fs("store", "6m")
    first, single = r["refusal"], r["single_refusal"]
    for refusal in (first, single):
        assert refusal["type"] == "StoreFull" and refusal["reason"] == "disk_full", r
        assert refusal["errno"] in (errno.ENOSPC, errno.EIO) and "is full" in refusal["message"], r
    assert r["stored"] > 500  # the disk, not anything smaller, was the limit
    assert r["refused_group_stored"] == 0  # of a refused put_many only what exc.stored names is there
    assert r["stored_readable"]
    assert r["refused_single_present"] is False and r["unchanged_by_single_refusal"]  # nothing half-written
    assert r["verify_after_refusal"] == [] and r["verify_after_single_refusal"] == []
    assert r["refusal_state"] == "disk_full"
    # the filler deleted: the refusal is over without a write, and writes work without reopening
    assert r["refusal_after_freeing"] is None
    assert r["put_after_freeing"] is True and r["readable_after_freeing"]
    assert r["verify_after_freeing"] == []


def test_daemon_with_demo_on_a_full_disk(tmp_path):
    """The issue's reproduction: ``serve --demo`` on a 6 MiB tmpfs, the fill stops at the full disk."""
    r = run_in_small_fs("daemon", "6m")
    assert r["demo_log"] and "StoreFull" in r["demo_log"][0], r  # the fill stopped, named, the daemon serves on
    status, body = r["readiness_full"]
    assert status == 400 and body["status"] == "notReady" and "disk_full" in body["reason"], r
    assert r["health_full"] == [200, {"status": "ok", "version": body["version"], "apiVersion": body["apiVersion"]}]
    status, ctype, body = r["upload_full"]
    assert status == 507 and ctype == JSON_CT, r
    assert body["code"] == 507 and body["message"].startswith("no space left for the store: "), r
    assert r["refused_chunk_present"] is False
    status, body = r["readiness_after_refused_upload"]
    assert status == 400 and "disk_full" in body["reason"]
    assert r["get_full"][0] == 200 and r["rchash_full"] == [200, ["durationSeconds", "hash", "proofs"]]
    assert 'chunkstore_writes_refused_total{reason="disk_full"} 1.0' in r["metrics_full"], r["metrics_full"]
    assert r["verify_full"][0] == 0 and "clean" in r["verify_full"][1], r
    # space freed: ready again and uploads go through, without a restart
    assert r["readiness_freed"][0] == 200 and r["readiness_freed"][1]["status"] == "ready"
    assert r["upload_freed"][0] == 201, r
    assert r["verify_freed"][0] == 0 and "clean" in r["verify_freed"][1]
    assert r["exit_code"] == 0


def test_import_on_a_full_disk_stops_with_a_clear_error(tmp_path):
    r = run_in_small_fs("import", "8m", str(tmp_path))
    # staging runs out of space: refused, store unchanged, staging area gone
    assert r["staging_full"]["type"] == "InsufficientSpace" and "staging area" in r["staging_full"]["message"], r
    assert r["unchanged_after_staging_full"] and ".import-staging" not in r["staging_left"]
    assert r["verify_after_staging_full"] == []
    # staged elsewhere, the records would not fit the store's disk: refused before any write
    assert r["publish_refused"]["type"] == "InsufficientSpace", r
    assert "not enough free space" in r["publish_refused"]["message"]
    assert r["unchanged_after_refusal"]
    assert r["cli_exit"] == 1 and "not enough free space" in r["cli_stderr"]
    # the disk fills while publishing all the same: typed, explained, consistent, and completed by a re-run
    full = r["publish_full"]
    assert full["type"] == "StoreFull" and full["reason"] == "disk_full", r
    assert full["notes"] and "run the import again" in full["notes"][0]
    assert r["verify_after_publish_full"] == []
    assert r["retry"] == {"type": "ok", "written": 600}
    assert r["verify_after_retry"] == [] and r["all_present"] and r["chunks_after_retry"] == 620


def test_a_store_reopened_on_a_full_disk_refuses_writes_at_once(tmp_path):
    """An operator's sweep: restarted on a disk with nothing free, /readiness said ready until a write failed."""
    r = run_in_small_fs("restart", "6m")
    assert r == {"fresh": None, "reopened": "disk_full", "probe_left": [], "after_freeing": None}, r


def test_lmdb_lock_files_on_a_full_disk_are_refused_not_a_sigbus(tmp_path):
    """An operator's sweep: every command (serve, import, verify, export) died of SIGBUS (exit 135) opening a
    store on a full disk whose lock.mdb files were missing (a restored backup; a new store, as an import
    staged elsewhere makes one): LMDB sizes the lock file with ftruncate and writes it through a shared map."""
    r = run_in_small_fs("lockfile", "6m")
    assert r["whole_after_create"] is True, r
    for key in ("reopen_full", "verify_full", "new_store_full"):
        refusal = r[key]
        assert refusal is not None and refusal["type"] == "StoreFull" and refusal["reason"] == "disk_full", r
        assert "lock.mdb" in refusal["message"] and "is full" in refusal["message"], r
    assert r["readers_full"] > 64  # past the first page of reader slots, on a full disk
    assert r["stats"] == 0 and r["verify"] == [], r


def test_serve_with_a_chainstate_file_starts_on_a_full_disk(tmp_path):
    """An operator's sweep: `serve --chainstate FILE` stored the file's chain state at every start, so on a
    full disk the restart exited 1 ("cannot store the chain state") though the store held that state already."""
    r = run_in_small_fs("chainstate", "6m")
    assert r["first_start"] is True and r["first_exit"] == 0, r
    assert r["same_listening"] is True and r["same_chainstate"] == [200, 100] and r["same_exit"] == 0, r
    # a chain state the store does not hold yet and cannot store: refused, as before
    assert r["newer_listening"] is False and r["newer_exit"] == 1, r
    assert any("cannot store the chain state" in m for m in r["newer_error"]), r


def test_a_store_filled_by_puts_can_still_remove_a_batch_on_its_full_disk(tmp_path):
    """An operator's sweep: a store that filled its own disk could not remove a batch (LMDB copies pages even
    to delete), so DELETE /batches was a 507 until space was freed outside the store. Puts now stop short of
    the disk's end, and the room they leave is the removal's."""
    r = run_in_small_fs("removal", "32m")
    refusal = r["refusal"]
    assert refusal["type"] == "StoreFull" and refusal["reason"] == "disk_full", r
    assert "full for puts" in refusal["message"] and "short of its end" in refusal["message"], r
    assert r["stored"] > 1000 and r["free_at_refusal"] < 2 << 20  # the disk was the limit, and was nearly used
    assert "removal_refusal" not in r and r["removed"] == r["stored"] and r["chunks_after"] == 0, r
    assert r["put_after_removal"] is True, r
    assert r["verify"] == []
