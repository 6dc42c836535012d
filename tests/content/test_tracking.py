"""``track_upload``, the one hook of tags and pins every upload path calls: Bee's tag rules, the pin it builds."""

from __future__ import annotations

import io
import os

import pytest

from chunkstore.content import UploadOptions, track_upload, write_file
from chunkstore.store.errors import UnknownTag
from chunkstore.swarm.redundancy.level import Level


@pytest.mark.parametrize(
    ("options", "new_tag"),
    [
        (UploadOptions(), True),  # deferred by default: a new tag, as the reference's getOrCreateSessionID
        (UploadOptions(deferred=False), False),  # direct, unpinned: counts under no tag
        (UploadOptions(deferred=False, pin=True), True),  # pinned: a tag even when direct
    ],
)
def test_a_tag_is_made_only_when_the_reference_makes_one(node, options, new_tag):
    before = {t.uid for t in node.store.tags.list()}
    tracker = track_upload(node.store, options)
    made = {t.uid for t in node.store.tags.list()} - before
    assert (tracker.tag != 0) == new_tag and made == ({tracker.tag} if new_tag else set())
    tracker.aborted(None, None)


def test_a_named_tag_is_used_and_an_unknown_one_refused_before_anything_is_written(node):
    uid = node.store.tags.create().uid
    assert track_upload(node.store, UploadOptions(tag=uid)).tag == uid
    tags = node.store.tags.list()
    with pytest.raises(UnknownTag):
        track_upload(node.store, UploadOptions(tag=uid + 100, pin=True))
    assert node.store.tags.list() == tags and node.store.pins.in_flux() == {}


def test_a_session_counts_under_the_tracker_tag_and_pins_its_reference(node):
    data = os.urandom(20 * 4096)
    session = node.session(options=UploadOptions(pin=True))
    uid = session.tracker.tag
    session.finish(write_file(io.BytesIO(data), session, level=Level.NONE))
    reference = session.reference
    tag = node.store.tags.get(uid)
    assert (tag.split, tag.seen, tag.stored, tag.synced, tag.sent) == (21, 0, 21, 21, 0)  # 20 leaves, the root
    assert tag.address == reference
    assert node.store.pins.get(reference).chunks == 21 and node.store.pins.in_flux() == {}
