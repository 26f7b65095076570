"""`append_chunks`: messages for one topic and queue cut into batches the store takes as one append.

A batch ends before a message that would take its encoded records past the store's append limit
(`max_append_size`) or its bodies past `maxMessageSize` (the limit a batch's bodies share). The
encoded size is the codec's (`store.codec.record_size`, IPv6 hosts assumed: what it is, or a few
bytes more). Pure functions; any thread.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypeVar

from store import Message
from store.log.codec import encode_properties, record_size

T = TypeVar("T")


def append_chunks(
    items: Sequence[T], message_of: Callable[[T], Message], max_append: int, max_bodies: int
) -> list[list[T]]:
    chunks: list[list[T]] = []
    chunk: list[T] = []
    size = bodies = 0
    for item in items:
        msg = message_of(item)
        body = len(msg.body)
        encoded = record_size(msg.topic, body, len(encode_properties(msg.properties)))
        if chunk and (size + encoded > max_append or bodies + body > max_bodies):
            chunks.append(chunk)
            chunk, size, bodies = [], 0, 0
        chunk.append(item)
        size += encoded
        bodies += body
    if chunk:
        chunks.append(chunk)
    return chunks
