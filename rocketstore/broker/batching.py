"""`append_chunks`: messages for one topic and queue cut into batches the store takes as one append.

A batch ends before a message that would take its encoded records past the store's append limit
(`max_append_size`) or its bodies past `maxMessageSize` (the limit a batch's bodies share). The
encoded size is the codec's (`store.codec.record_size`, IPv6 hosts assumed: what it is, or a few
bytes more); a turn's sends that fit surely, by a bound of 4 bytes per character, are not encoded
to be counted. Pure functions; any thread.
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
    if _fit_one_append(items, message_of, max_append, max_bodies):
        return [list(items)]
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


def _fit_one_append(items: Sequence[T], message_of: Callable[[T], Message], max_append: int, max_bodies: int) -> bool:
    """Whether the items surely fit one append, from a bound that encodes nothing: a character
    of a topic or property is at most 4 bytes of UTF-8 (the common case: a loop turn's sends,
    far below the limits, which the encoding would only confirm)."""
    size = bodies = 0
    fixed = record_size("", 0, 0)
    try:
        for item in items:
            msg = message_of(item)
            body = len(msg.body)
            props = msg.properties
            chars = len(msg.topic) + sum(map(len, props)) + sum(map(len, props.values())) + 2 * len(props)
            size += fixed + body + 4 * chars
            bodies += body
    except TypeError:  # not text: the encoding's count says what it is
        return False
    return size <= max_append and bodies <= max_bodies
