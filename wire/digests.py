"""Body digests of the client API (`apache.rocketmq.v2.Digest`), shared by the broker and the
client: CRC32 as 8 upper-case hex digits (what the official clients expect), MD5 and SHA1 as
lower-case hex. Pure functions, thread-safe."""

from __future__ import annotations

import hashlib
import zlib

from wire.rpc import messaging_pb2 as pb


def crc32_hex(body: bytes) -> str:
    return f"{zlib.crc32(body) & 0xFFFFFFFF:08X}"


def digest_matches(digest: pb.Digest, body: bytes) -> bool:
    """Does `body` match `digest`? A digest type we do not know is not held against the body."""
    expected = digest.checksum.strip()
    if digest.type == pb.CRC32:
        try:
            return int(expected, 16) == zlib.crc32(body) & 0xFFFFFFFF
        except ValueError:
            return False
    if digest.type == pb.MD5:
        return expected.lower() == hashlib.md5(body).hexdigest()
    if digest.type == pb.SHA1:
        return expected.lower() == hashlib.sha1(body).hexdigest()
    return True
