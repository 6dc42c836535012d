"""Sequence feed lookup: time and chunk reads to find the latest of n updates.

For n = 10, 1,000 and 10,000 updates held in an in-memory map (address ->
data, the addresses derived exactly as in a store), this measures
``chunkstore.swarm.feeds.find_latest`` and prints, per n:

* the chunk reads the lookup makes, next to the reads of the reference
  node's finder on the same feed (its probe pattern, simulated: each round
  probes ``base + 2^l - 1`` for l = level..1 and the reference issues every
  probe of a round concurrently, so all count) and of a linear scan;
* the lookup time, against a baseline measured in the same run: one probe,
  i.e. deriving one update address and reading it from the map. A lookup
  costs about ``reads`` probes; the ratio shows what the search adds.

Run: ``PYTHONPATH=. python bench/bench_feeds.py [--sizes 10,1000,10000] [--seconds 1]``.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

from chunkstore.swarm.feeds import find_latest, topic_from_string, update_address

OWNER = bytes.fromhex("8d3766440f0d7b949a5e32995d09619a7f86e632")
TOPIC = topic_from_string("bench_feeds")
REFERENCE_LEVELS = 8  # the reference finder's DefaultLevels


def reference_finder_reads(n: int) -> int:
    """Reads of the reference node's sequence finder on a gap-free feed of n updates.

    Round structure (pkg/feeds/sequence, asyncFinder): after reading index 0,
    a round at (base, level) probes base + 2^l - 1 for l = level..1. With f
    the highest level found: f = level = 8 starts another top round at
    base + 255; f = level < 8 ends the search; f = 0 ends it at base; else
    the next round is (base + 2^f - 1, f).
    """
    if n == 0:
        return 1
    reads, base, level = 1, 0, REFERENCE_LEVELS
    while True:
        reads += level
        found = max((lv for lv in range(1, level + 1) if base + (1 << lv) - 1 < n), default=0)
        if found == level == REFERENCE_LEVELS:
            base += (1 << level) - 1
            continue
        if found == level or found == 0:
            return reads
        base, level = base + (1 << found) - 1, found


def timed(fn: Callable[[], object], seconds: float, rounds: int = 5) -> float:
    """Median seconds per call over ``rounds`` rounds of about ``seconds / rounds`` each."""
    per_round = seconds / rounds
    samples = []
    for _ in range(rounds):
        calls = 0
        start = time.perf_counter()
        while True:
            fn()
            calls += 1
            elapsed = time.perf_counter() - start
            if elapsed >= per_round:
                break
        samples.append(elapsed / calls)
    return statistics.median(samples)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="10,1000,10000", help="comma-separated update counts")
    parser.add_argument("--seconds", type=float, default=1.0, help="measuring time per figure")
    args = parser.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",")]

    largest = max(sizes)
    addresses = [update_address(OWNER, TOPIC, i) for i in range(largest + 1)]
    print(f"feed of up to {largest} updates; owner {OWNER.hex()}, topic {TOPIC.hex()[:16]}...")
    print()
    header = f"{'updates':>8} {'reads':>6} {'ref. reads':>10} {'linear':>7} {'lookup us':>10} {'probe us':>9} {'lookup/probe':>13}"
    print(header)
    print("-" * len(header))
    for n in sizes:
        chunks = {addresses[i]: b"update %d" % i for i in range(n)}
        get = chunks.get
        found = find_latest(get, OWNER, TOPIC)
        assert found.index == n - 1 and found.next_index == n, (n, found)
        probe_at = n // 2

        def one_probe(i: int = probe_at, get: Callable[[bytes], bytes | None] = get) -> object:
            return get(update_address(OWNER, TOPIC, i))

        def lookup(get: Callable[[bytes], bytes | None] = get) -> object:
            return find_latest(get, OWNER, TOPIC)

        probe = timed(one_probe, args.seconds)
        look = timed(lookup, args.seconds)
        print(
            f"{n:>8} {found.reads:>6} {reference_finder_reads(n):>10} {n + 1:>7} "
            f"{look * 1e6:>10.1f} {probe * 1e6:>9.2f} {look / probe:>12.1f}x"
        )
    print()
    print("reads: chunk reads of find_latest; ref. reads: the reference node's finder on the same feed;")
    print("linear: a scan from index 0; lookup/probe: lookup time over one probe (address + map read).")


if __name__ == "__main__":
    main()
