"""Pop consumption's replicated state: the events (`pop_state`) and a slave's journal of events to
hand back to its master (`pop_journal`). Used by the broker's pop service and by replication.
"""
