"""Runs gRPC without its EventEngine in a broker's process: imported for that effect, first, by
the broker command (`rocketstore.commands.broker`), before anything imports gRPC.

`GRPC_EXPERIMENTS` set to `NO_EVENT_ENGINE` turns off the experiments that route gRPC's I/O
through its EventEngine threads, bringing back its older pollers, where the thread (or the
`grpc.aio` loop's poller) that waits for a call polls for it itself. With both replication ends
on event loops (haStreamOnEventLoop) that measured 1.2-1.3x the puts per second of the same shape
with the EventEngine at one and eight clients over remoting (docs/benchmarks.md, "tenth round");
the threaded shape measured the same either way. The experiment names are gRPC's own (pinned in
constraints.txt) and go when gRPC removes the old pollers. A value the environment already sets
is kept: `GRPC_EXPERIMENTS=` (empty) runs the broker with gRPC's defaults.

Thread-safety: runs once, at import.
"""

import os
from collections.abc import MutableMapping

NO_EVENT_ENGINE = (
    "-event_engine_client,-event_engine_listener,-event_engine_callback_cq,-event_engine_for_all_other_endpoints"
)


def prefer_pollers(environ: MutableMapping[str, str]) -> str:
    """Set `GRPC_EXPERIMENTS` to `NO_EVENT_ENGINE` unless `environ` sets it; the value in force."""
    return environ.setdefault("GRPC_EXPERIMENTS", NO_EVENT_ENGINE)


prefer_pollers(os.environ)
