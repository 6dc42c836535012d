"""The storage engine: sharded LMDB holding chunks, their postage stamps, batch slots and batches.

Holds the on-disk layout (layout.py, FORMAT_VERSION), environments and
shards, the writer lock, write sessions applying the slot rule across
shards, open-time recovery, the batch store, per-bin entry counters, the
integrity check (verify.py), and ``ChunkStore``. It knows nothing of the
reserve policy: a policy takes part in writes only through the hook in
policy.py, registered when the store opens. See README.md beside this file
for the layout and the crash-safety argument.

May import chunkstore.swarm; nothing above it.
"""
