"""The client API's request signature, as RocketMQ 5's official clients make it.

Every call carries `x-mq-date-time` (`%Y%m%dT%H%M%SZ`) and

    authorization: MQv2-HMAC-SHA1 Credential=<access key>, SignedHeaders=x-mq-date-time, Signature=<hex>

where the signature is HMAC-SHA1 under the secret key over the date-time header, in lower-case hex.
The official clients label local time as UTC, so the date is not checked against the clock: the
signature proves the secret key, and TLS is what keeps a captured header from being reused.

Functions, no state; any thread.
"""

from __future__ import annotations

import hashlib
import hmac
import time
from typing import NamedTuple

ALGORITHM = "MQv2-HMAC-SHA1"
DATE_HEADER = "x-mq-date-time"
AUTHORIZATION_HEADER = "authorization"


class Authorization(NamedTuple):
    access_key: str
    signed_headers: str
    signature: str


def signature(secret_key: str, date_time: str) -> str:
    return hmac.new(secret_key.encode("utf-8"), date_time.encode("utf-8"), hashlib.sha1).hexdigest()


def date_time_now() -> str:
    return time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())


def authorization(access_key: str, secret_key: str, date_time: str) -> str:
    return (
        f"{ALGORITHM} Credential={access_key}, SignedHeaders={DATE_HEADER}, "
        f"Signature={signature(secret_key, date_time)}"
    )


def metadata(access_key: str, secret_key: str) -> tuple[tuple[str, str], ...]:
    """The headers that sign one call."""
    now = date_time_now()
    return ((DATE_HEADER, now), (AUTHORIZATION_HEADER, authorization(access_key, secret_key, now)))


def parse_authorization(value: str) -> Authorization | None:
    """The parts of an `authorization` header; None when it is not RocketMQ's form."""
    algorithm, _, rest = value.strip().partition(" ")
    if algorithm != ALGORITHM:
        return None
    parts: dict[str, str] = {}
    for item in rest.split(","):
        key, sep, val = item.strip().partition("=")
        if not sep:
            return None
        parts[key] = val.strip()
    if not {"Credential", "SignedHeaders", "Signature"} <= parts.keys():
        return None
    return Authorization(parts["Credential"], parts["SignedHeaders"], parts["Signature"])


def verify(value: str, date_time: str, secret_of) -> tuple[str | None, str]:
    """(access key, "") when `value` is a valid signature of `date_time` by a known key
    (`secret_of(access_key)` -> secret key or None); (None, why) otherwise."""
    parsed = parse_authorization(value)
    if parsed is None:
        return None, f"the authorization header is not {ALGORITHM} Credential=..., SignedHeaders=..., Signature=..."
    if parsed.signed_headers.lower() != DATE_HEADER:
        return None, f"the signature must cover {DATE_HEADER} (it covers {parsed.signed_headers!r})"
    secret = secret_of(parsed.access_key)
    if secret is None:
        return None, f"unknown access key {parsed.access_key!r}"
    if not date_time:
        return None, f"the request has no {DATE_HEADER} header"
    expected = signature(secret, date_time)
    if not hmac.compare_digest(expected, parsed.signature.lower()):
        return None, f"the signature does not match access key {parsed.access_key!r}"
    return parsed.access_key, ""
