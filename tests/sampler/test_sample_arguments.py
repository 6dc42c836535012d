"""reserve_sample refuses arguments of the wrong type or range by name, before any scan starts."""

from __future__ import annotations

import pytest

from chunkstore.reserve import ReserveStore
from sampler import reserve_sample
from sampler.pipeline import MAX_DEPTH

ANCHOR = b"\x5a" * 32
NOW = 1_700_000_000_000_000_000


@pytest.fixture
def store(tmp_path):
    s = ReserveStore(str(tmp_path / "s"))
    yield s
    s.close()


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"anchor": ANCHOR.hex()}, TypeError, "anchor must be bytes, not str"),
        ({"anchor": None}, TypeError, "anchor must be bytes, not NoneType"),
        ({"anchor": b""}, ValueError, "anchor is empty"),
        ({"depth": 1.5}, TypeError, "depth must be an int, not float"),
        ({"depth": "0"}, TypeError, "depth must be an int, not str"),
        ({"depth": True}, TypeError, "depth must be an int, not bool"),
        ({"depth": -1}, ValueError, "depth -1 is outside 0..255"),
        ({"depth": MAX_DEPTH + 1}, ValueError, "depth 256 is outside 0..255"),
        ({"consensus_time": 1.7e18}, TypeError, "consensus_time must be an int, not float"),
        ({"consensus_time": -1}, ValueError, "consensus_time -1 is negative"),
        ({"k": 0}, ValueError, "k must be positive"),
    ],
)
def test_bad_argument_is_refused_by_name(store, kwargs, error, message):
    args = {"anchor": ANCHOR, "depth": 0, "consensus_time": NOW, **kwargs}
    with pytest.raises(error, match=message):
        reserve_sample(store, args["anchor"], args["depth"], args["consensus_time"], workers=0, k=kwargs.get("k", 8))


@pytest.mark.parametrize("anchor", [ANCHOR, bytearray(ANCHOR), memoryview(ANCHOR), b"\x01" * 5])
def test_byte_anchors_of_any_length_pass_the_checks(store, anchor):
    """Bee's anchors are any hex: the checks leave a valid call to the sampler (an empty store: too few chunks)."""
    from sampler import InsufficientSample

    with pytest.raises(InsufficientSample):
        reserve_sample(store, anchor, MAX_DEPTH, NOW, workers=0)
