"""Moving reserves in and out: the reference node's ``db export reserve`` tar and the snapshot format.

Holds both formats' readers and writers, the import pipeline (readers,
validation workers in a shared ring, sorted runs, a memory budget sized
once, bulk publishing that settles the slot rule as puts would) and the
export. README.md beside this file describes the formats and the budget.

May import chunkstore.reserve (an import keeps to the storage radius and
wakes the eviction), chunkstore.store and chunkstore.swarm.
"""
