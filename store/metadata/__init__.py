"""The store's JSON metadata: topics (and auto-creation limits), consumer offsets, and the atomic
JSON file writer they share.
"""
