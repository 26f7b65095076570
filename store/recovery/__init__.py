"""Start-up and role changes: the lock and abort files, the checkpoint, recovery of the CommitLog
and queues, a slave's truncation to its master's log.
"""
