"""The CommitLog: segments (mapped files), the record codec, the put path, flushing, and the
checks on what is read back (damage). Thread-safety: each module says.
"""
