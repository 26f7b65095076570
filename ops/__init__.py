"""Operator tools for a store on disk, above the engine: `inspect` (read-only: what a store holds
and where it is damaged) and `repair` (cut a damaged CommitLog back to a record boundary, or
zero-fill a short last segment), behind `rocketstore inspect` and `rocketstore repair`."""
