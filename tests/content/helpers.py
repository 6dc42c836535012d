"""Shared helpers of the content tests: a store with a node-owned batch, and the session to fill it."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from chunkstore.content import NodeStamper, UploadSession
from chunkstore.reserve import ReserveStore
from chunkstore.store.batchstore import Batch
from chunkstore.swarm.signer import Signer

NODE_KEY = bytes.fromhex("22" * 32)


@dataclass
class Node:
    store: ReserveStore
    signer: Signer
    stamper: NodeStamper
    batch: Batch

    def session(self, **kw: object) -> UploadSession:
        return UploadSession(self.store, self.stamper, self.batch.id, **kw)  # type: ignore[arg-type]


def node_batch(signer: Signer, depth: int = 20, bucket_depth: int = 16, immutable: bool = True) -> Batch:
    return Batch(os.urandom(32), signer.address, depth, bucket_depth, immutable, 10**15, 0)


def open_node(path: Path, depth: int = 20, bucket_depth: int = 16, immutable: bool = True) -> Node:
    store = ReserveStore(path)
    signer = Signer(NODE_KEY)
    batch = node_batch(signer, depth, bucket_depth, immutable)
    store.batches.add(batch)
    return Node(store, signer, NodeStamper(store, signer), batch)
