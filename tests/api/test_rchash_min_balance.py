"""The daemon's sample leaves out batches the reference's agent would find too poor to vouch for a chunk.

The reference's /rchash samples with ``minBatchBalance()`` of its storage
incentives agent (pkg/storageincentives/agent.go): the chain state's total
amount plus the current price times the blocks from the chain state's block to
the start of the round after next, ``((currentBlock / 152) + 2) * 152``. A
batch still alive but due to run out before then is not sampled.
"""

from __future__ import annotations

import random

from aiohttp.test_utils import TestClient, TestServer

from api.app import default_sample_fn, make_app
from api.config import Config
from api.sampling import sample_min_balance
from chunkstore.reserve import ChainState, ReserveStore
from chunkstore.swarm.cac import make_cac
from tests.api.helpers import Uploader

RICH = Uploader(seed=b"rich batch")
POOR = Uploader(seed=b"poor batch")


def _store(path) -> ReserveStore:
    store = ReserveStore(path, shards=2)
    store.batches.add(RICH.batch(value=10**15))
    store.batches.add(POOR.batch(value=600))  # above the total amount (500): alive, but below 716
    rng = random.Random(9)
    for i in range(60):
        up = RICH if i % 2 else POOR
        address, data = make_cac(rng.randbytes(80))
        store.put(data, up.stamp(address, timestamp_ns=1_000))
    return store


def test_min_balance_from_the_chain_state(tmp_path):
    store = _store(tmp_path / "s")
    try:
        assert sample_min_balance(store) is None  # no chain state: nothing to go by
        store.reserve.set_chainstate(ChainState(1000, 500, 1))
        # the round after next starts at block (1000 // 152 + 2) * 152 = 1216: 216 blocks at price 1
        assert sample_min_balance(store) == 500 + 216
        store.reserve.set_chainstate(ChainState(1000, 500, 3, chain_tip=1300))  # the head is in round 8
        assert sample_min_balance(store) == 500 + 3 * ((1300 // 152 + 2) * 152 - 1000)
        # the operator's --min-batch-balance wins
        assert sample_min_balance(store, 7) == 7
    finally:
        store.close()


async def test_rchash_leaves_out_batches_below_the_agents_minimum(tmp_path):
    store = _store(tmp_path / "s")
    config = Config(data_dir=tmp_path, workers=0)
    app = make_app(store, config, sample_fn=default_sample_fn(store, config), close_store=True)
    async with TestClient(TestServer(app)) as client:
        r = await client.get("/rchash/0/00/01?consensusTime=2000&verbose=true")
        assert r.status == 200
        before = {it["batchID"] for it in (await r.json())["items"]}
        assert before == {RICH.batch_id.hex(), POOR.batch_id.hex()}
        r = await client.post("/chainstate", json={"block": 1000, "totalAmount": "500", "currentPrice": "1"})
        assert r.status < 300, await r.text()
        r = await client.get("/rchash/0/00/01?consensusTime=2000&verbose=true")
        assert r.status == 200
        assert {it["batchID"] for it in (await r.json())["items"]} == {RICH.batch_id.hex()}
