"""Body digests of the client API (`apache.rocketmq.v2.Digest`), shared by the broker and the
client. What the official clients check on a received message differs by language for CRC32
(the Java and Python clients read 8 hex digits, the Node.js client a decimal number) and agrees
for MD5 (upper-case hex): the broker sends MD5 (`md5_hex`), as RocketMQ's proxy does. What a
client sends is accepted in any of those forms. Pure functions, thread-safe."""

from __future__ import annotations

import hashlib
import zlib

from wire.rpc import messaging_pb2 as pb


def crc32_hex(body: bytes) -> str:
    return f"{zlib.crc32(body) & 0xFFFFFFFF:08X}"


def md5_hex(body: bytes) -> str:
    return hashlib.md5(body).hexdigest().upper()


def digest_matches(digest: pb.Digest, body: bytes) -> bool:
    """Does `body` match `digest`? A digest type we do not know is not held against the body."""
    expected = digest.checksum.strip()
    if digest.type == pb.CRC32:
        actual = zlib.crc32(body) & 0xFFFFFFFF
        try:
            as_hex = int(expected, 16) == actual
        except ValueError:
            as_hex = False
        return as_hex or (expected.isdigit() and int(expected) == actual)
    if digest.type == pb.MD5:
        return expected.lower() == hashlib.md5(body).hexdigest()
    if digest.type == pb.SHA1:
        return expected.lower() == hashlib.sha1(body).hexdigest()
    return True
