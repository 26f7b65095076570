"""The broker process's garbage-collector settings, applied once the broker has started.

CPython's cyclic collector runs when young allocations outnumber frees by `threshold0` (700),
and every tenth young collection looks at the older generation, every tenth of those at the whole
heap. A started broker holds tens of thousands of long-lived objects (topic and subscription
tables, the recent producer ids, gRPC's and the store's own state) that every full collection
walked again: measured with `bench.put_switches --cells 1x32,64x1` (20,000 1 KiB messages each,
SYNC_MASTER + SYNC_FLUSH), the master spent 0.39 s of its 8.4 s of CPU in collections, and each
full one held the GIL for about 45 ms, which every put waiting at that moment paid. The put path
frees almost everything it allocates by reference counting, so young collections find little.

`settle()` moves what the started broker holds into the collector's permanent generation
(`gc.freeze`, so full collections skip it; such objects are still freed by reference counting
when the broker lets go of them) and collects young objects less often. The same run then spent
0.03 s in collections, none of them full.

Thread-safety: call once, from the thread that starts the broker, before it serves load; the
collector's settings are process-wide.
"""

from __future__ import annotations

import gc
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class CollectorThresholds:
    """`gc.set_threshold`'s three numbers: young allocations net of frees before a young
    collection, and young (then middle) collections before the next generation is collected."""

    young_allocations: int = 20_000
    young_collections: int = 20
    middle_collections: int = 50


def settle(thresholds: CollectorThresholds = CollectorThresholds()) -> int:
    """Collects once, freezes what survives and sets `thresholds`; returns how many objects the
    permanent generation holds now."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(thresholds.young_allocations, thresholds.young_collections, thresholds.middle_collections)
    return gc.get_freeze_count()
