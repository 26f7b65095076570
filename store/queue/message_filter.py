"""Tag filtering for reads (RocketMQ's SubscriptionData with TAG expressions).

An expression is `*` (everything) or tags joined by `||` ("TagA || TagB"). A read first compares
the ConsumeQueue's tags hash code (cheap, may collide), then the message's real TAGS property.
Immutable, thread-safe.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..log.codec import java_string_hash

SUB_ALL = "*"


@dataclass(frozen=True, slots=True)
class TagFilter:
    tags: frozenset[str]
    codes: frozenset[int]

    @classmethod
    def parse(cls, expression: str | None) -> "TagFilter | None":
        """None (no filtering) for `*` or an empty expression."""
        if expression is None or not expression.strip() or expression.strip() == SUB_ALL:
            return None
        tags = frozenset(t.strip() for t in expression.split("||") if t.strip())
        if not tags:
            raise ValueError(f"tag expression {expression!r} names no tag")
        if SUB_ALL in tags:
            return None
        return cls(tags, frozenset(java_string_hash(t) for t in tags))

    def matches_code(self, tags_code: int) -> bool:
        return tags_code in self.codes

    def matches_tags(self, tags: str | None) -> bool:
        return tags is not None and tags in self.tags
