"""ConsumeQueues: the 20-byte units, dispatch from the CommitLog, their flushing, tag filters, and
reads of messages by topic, queue and queue offset.
"""
