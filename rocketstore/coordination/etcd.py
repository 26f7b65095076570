"""`EtcdClient`: the few etcd v3 calls controller mode needs, over etcd's HTTP/JSON gateway.

Why the gateway: the Python gRPC clients for etcd (python-etcd3 and its forks) are unmaintained
and generated against protobuf versions far older than the one this project pins; the gateway is
part of etcd itself (`/v3/...` on the client port, stable since 3.4) and needs only the standard
library. Every call is one POST of a JSON body:

| call | path | body |
|---|---|---|
| range | `/v3/kv/range` | `{"key", "range_end"}` |
| put | `/v3/kv/put` | `{"key", "value", "lease"}` |
| delete | `/v3/kv/deleterange` | `{"key", "range_end"}` |
| txn | `/v3/kv/txn` | `{"compare": [...], "success": [...], "failure": [...]}` |
| lease | `/v3/lease/grant`, `/v3/lease/keepalive`, `/v3/lease/revoke`, `/v3/lease/timetolive` | `{"TTL"}` / `{"ID"}` |
| health | `/v3/maintenance/status` | `{}` |

Keys and values travel base64-encoded; int64 fields come back as JSON strings and are left out
when zero (read as 0). An error answer is `{"error", "code", "message"}` (gRPC codes).

Security: `https://` endpoints use TLS (`ca_file` to trust the server, `cert_file` + `key_file`
for etcd's client-certificate authentication); with `user` and `password` the client gets a token
from `/v3/auth/authenticate` and sends it in the `Authorization` header, authenticating again once
when etcd says the token is no longer valid. The password never appears in reprs or logs.

Transport: one keep-alive `http.client.HTTP(S)Connection` per thread and endpoint, every request
bounded by `timeout_s`. A connection error moves on to the next endpoint (the last one that
answered is tried first); `EtcdUnavailable` when none answered. Values are never logged (they
may hold endpoints an operator considers private; secrets never go to etcd at all).

Thread-safety: any number of threads may share a client.
"""

from __future__ import annotations

import base64
import http.client
import json
import socket
import ssl
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from urllib.parse import urlsplit

GRPC_NOT_FOUND = 5
GRPC_UNAUTHENTICATED = 16


class EtcdError(Exception):
    """etcd answered with an error."""


class EtcdUnavailable(EtcdError):
    """No endpoint answered in time."""


class LeaseNotFound(EtcdError):
    """etcd no longer has the lease (it expired or was revoked)."""


@dataclass(frozen=True, slots=True)
class KeyValue:
    key: str
    value: bytes
    create_revision: int
    mod_revision: int
    version: int
    lease: int


@dataclass(frozen=True, slots=True)
class RangeResult:
    kvs: tuple[KeyValue, ...]
    revision: int


@dataclass(frozen=True, slots=True)
class Compare:
    """One condition of a transaction (build with the class methods)."""

    key: str
    target: str
    value: int | bytes
    result: str = "EQUAL"

    _FIELDS = {
        "VERSION": "version",
        "CREATE": "create_revision",
        "MOD": "mod_revision",
        "VALUE": "value",
        "LEASE": "lease",
    }

    @classmethod
    def mod_revision(cls, key: str, revision: int, result: str = "EQUAL") -> "Compare":
        return cls(key, "MOD", revision, result)

    @classmethod
    def create_revision(cls, key: str, revision: int, result: str = "EQUAL") -> "Compare":
        return cls(key, "CREATE", revision, result)

    @classmethod
    def absent(cls, key: str) -> "Compare":
        return cls(key, "CREATE", 0)

    @classmethod
    def version(cls, key: str, version: int, result: str = "EQUAL") -> "Compare":
        return cls(key, "VERSION", version, result)

    @classmethod
    def value_is(cls, key: str, value: bytes, result: str = "EQUAL") -> "Compare":
        return cls(key, "VALUE", value, result)

    @classmethod
    def lease(cls, key: str, lease_id: int, result: str = "EQUAL") -> "Compare":
        return cls(key, "LEASE", lease_id, result)

    def to_json(self) -> dict:
        field = self._FIELDS[self.target]
        value = _b64(self.value) if isinstance(self.value, bytes) else str(self.value)
        return {"key": _b64(self.key), "target": self.target, "result": self.result, field: value}


@dataclass(frozen=True, slots=True)
class Put:
    key: str
    value: bytes
    lease: int = 0

    def to_json(self) -> dict:
        body = {"key": _b64(self.key), "value": _b64(self.value)}
        if self.lease:
            body["lease"] = str(self.lease)
        return {"request_put": body}


@dataclass(frozen=True, slots=True)
class Delete:
    key: str
    prefix: bool = False

    def to_json(self) -> dict:
        return {"request_delete_range": _key_range(self.key, self.prefix)}


@dataclass(frozen=True, slots=True)
class Get:
    key: str
    prefix: bool = False

    def to_json(self) -> dict:
        return {"request_range": _key_range(self.key, self.prefix)}


@dataclass(frozen=True, slots=True)
class TxnResult:
    succeeded: bool
    revision: int
    ranges: tuple[RangeResult, ...]


@dataclass(frozen=True, slots=True)
class Lease:
    id: int
    ttl_s: int


# -- the JSON codec (pure) ---------------------------------------------------------------------


def _b64(data: str | bytes) -> str:
    raw = data.encode("utf-8") if isinstance(data, str) else data
    return base64.b64encode(raw).decode("ascii")


def _unb64(text: str) -> bytes:
    return base64.b64decode(text) if text else b""


def prefix_end(prefix: str) -> bytes:
    """The first key after every key starting with `prefix` (etcd's range_end for a prefix)."""
    raw = bytearray(prefix.encode("utf-8"))
    while raw and raw[-1] == 0xFF:
        raw.pop()
    if not raw:
        return b"\0"
    raw[-1] += 1
    return bytes(raw)


def _key_range(key: str, prefix: bool) -> dict:
    body = {"key": _b64(key)}
    if prefix:
        body["range_end"] = _b64(prefix_end(key))
    return body


def parse_kv(item: dict) -> KeyValue:
    return KeyValue(
        key=_unb64(item.get("key", "")).decode("utf-8"),
        value=_unb64(item.get("value", "")),
        create_revision=int(item.get("create_revision", 0)),
        mod_revision=int(item.get("mod_revision", 0)),
        version=int(item.get("version", 0)),
        lease=int(item.get("lease", 0)),
    )


def parse_range(answer: dict) -> RangeResult:
    return RangeResult(
        kvs=tuple(parse_kv(item) for item in answer.get("kvs", ())),
        revision=int(answer.get("header", {}).get("revision", 0)),
    )


def parse_txn(answer: dict) -> TxnResult:
    ranges = tuple(parse_range(r["response_range"]) for r in answer.get("responses", ()) if "response_range" in r)
    return TxnResult(
        succeeded=bool(answer.get("succeeded", False)),
        revision=int(answer.get("header", {}).get("revision", 0)),
        ranges=ranges,
    )


def parse_endpoints(endpoints: Sequence[str] | str) -> tuple[tuple[str, str, int], ...]:
    """(scheme, host, port) of each endpoint; a bare host:port is http."""
    items = endpoints.replace(",", ";").split(";") if isinstance(endpoints, str) else list(endpoints)
    parsed = []
    for item in (i.strip() for i in items):
        if not item:
            continue
        url = urlsplit(item if "://" in item else "http://" + item)
        if url.scheme not in ("http", "https") or not url.hostname or url.port is None:
            raise ValueError(f"etcd endpoint {item!r}: expected http://host:port or https://host:port")
        parsed.append((url.scheme, url.hostname, url.port))
    if not parsed:
        raise ValueError("no etcd endpoint given")
    return tuple(parsed)


# -- the client --------------------------------------------------------------------------------


class EtcdClient:
    def __init__(
        self,
        endpoints: Sequence[str] | str,
        *,
        timeout_s: float = 1.0,
        user: str = "",
        password: str = "",
        ca_file: str = "",
        cert_file: str = "",
        key_file: str = "",
    ) -> None:
        self._endpoints = parse_endpoints(endpoints)
        self.endpoints = tuple(f"{scheme}://{h}:{p}" for scheme, h, p in self._endpoints)
        self._timeout_s = timeout_s
        if bool(user) != bool(password):
            raise ValueError("etcd authentication needs both a user and a password")
        self._user = user
        self._password = password
        self._token = ""
        self._ssl: ssl.SSLContext | None = None
        if any(scheme == "https" for scheme, _, _ in self._endpoints):
            self._ssl = ssl.create_default_context(cafile=ca_file or None)
            if cert_file:
                self._ssl.load_cert_chain(cert_file, key_file or None)
        self._local = threading.local()
        self._preferred = 0
        self._closed = False
        # Calls that ended in an error (unreachable, refused, lease gone): a metric, and racy
        # between threads by a count at worst.
        self.failed_calls = 0
        self._all_lock = threading.Lock()
        self._all: list[http.client.HTTPConnection] = []  # every thread's, for close()

    def __repr__(self) -> str:
        user = f", user={self._user!r}, password=<hidden>" if self._user else ""
        return f"EtcdClient({';'.join(self.endpoints)!r}{user})"

    # -- transport ---------------------------------------------------------------------------

    def _connection(self, index: int) -> http.client.HTTPConnection:
        connections = self._local.__dict__.setdefault("connections", {})
        connection = connections.get(index)
        if connection is None:
            scheme, host, port = self._endpoints[index]
            if scheme == "https":
                connection = http.client.HTTPSConnection(host, port, timeout=self._timeout_s, context=self._ssl)
            else:
                connection = http.client.HTTPConnection(host, port, timeout=self._timeout_s)
            connections[index] = connection
            with self._all_lock:
                self._all.append(connection)
        return connection

    def _drop(self, index: int) -> None:
        connection = self._local.__dict__.get("connections", {}).pop(index, None)
        if connection is not None:
            connection.close()

    def _call(self, path: str, body: dict) -> dict:
        if self._user and not self._token:
            self._authenticate()
        try:
            return self._post(path, body)
        except EtcdError as exc:
            if not self._user or getattr(exc, "code", 0) != GRPC_UNAUTHENTICATED:
                raise
        self._authenticate()  # the token expired (etcd's simple tokens live 5 minutes idle)
        return self._post(path, body)

    def _authenticate(self) -> None:
        answer = self._post("/v3/auth/authenticate", {"name": self._user, "password": self._password}, auth=False)
        self._token = answer.get("token", "")

    def _post(self, path: str, body: dict, *, auth: bool = True) -> dict:
        try:
            return self._post_once(path, body, auth=auth)
        except EtcdError:
            self.failed_calls += 1
            raise

    def _post_once(self, path: str, body: dict, *, auth: bool) -> dict:
        if self._closed:
            raise EtcdError("the etcd client is closed")
        payload = json.dumps(body).encode()
        headers = {"Content-Type": "application/json"}
        if auth and self._token:
            headers["Authorization"] = self._token
        failures = []
        count = len(self._endpoints)
        for step in range(count):
            index = (self._preferred + step) % count
            try:
                connection = self._connection(index)
                connection.request("POST", path, payload, headers)
                response = connection.getresponse()
                raw = response.read()
            except (OSError, http.client.HTTPException, socket.timeout) as exc:
                self._drop(index)
                failures.append(f"{self.endpoints[index]}: {type(exc).__name__}: {exc}")
                continue
            if response.status >= 500 and response.status != 501:
                failures.append(f"{self.endpoints[index]}: HTTP {response.status}")
                continue
            self._preferred = index
            try:
                answer = json.loads(raw or b"{}")
            except json.JSONDecodeError:
                raise EtcdError(f"{path}: etcd answered HTTP {response.status} with a body that is not JSON") from None
            if "error" in answer or response.status >= 400:
                code = answer.get("code", 0)
                message = answer.get("message") or answer.get("error") or f"HTTP {response.status}"
                if "lease not found" in message:
                    raise LeaseNotFound(message)
                error = EtcdError(f"{path}: {message} (code {code})")
                error.code = code  # type: ignore[attr-defined]
                raise error
            return answer
        raise EtcdUnavailable(f"{path}: no etcd endpoint answered: {'; '.join(failures)}")

    def call(self, path: str, body: dict) -> dict:
        """Any other gateway call (administration: users, roles, auth), as JSON in and out."""
        return self._call(path, body)

    # -- kv ----------------------------------------------------------------------------------

    def get(self, key: str) -> KeyValue | None:
        result = parse_range(self._call("/v3/kv/range", _key_range(key, False)))
        return result.kvs[0] if result.kvs else None

    def get_prefix(self, prefix: str) -> RangeResult:
        return parse_range(self._call("/v3/kv/range", _key_range(prefix, True)))

    def put(self, key: str, value: bytes, *, lease: int = 0) -> int:
        answer = self._call("/v3/kv/put", Put(key, value, lease).to_json()["request_put"])
        return int(answer.get("header", {}).get("revision", 0))

    def delete(self, key: str, *, prefix: bool = False) -> int:
        return int(self._call("/v3/kv/deleterange", _key_range(key, prefix)).get("deleted", 0))

    def txn(
        self,
        compare: Sequence[Compare],
        success: Sequence[Put | Delete | Get],
        failure: Sequence[Put | Delete | Get] = (),
    ) -> TxnResult:
        body = {
            "compare": [c.to_json() for c in compare],
            "success": [op.to_json() for op in success],
            "failure": [op.to_json() for op in failure],
        }
        return parse_txn(self._call("/v3/kv/txn", body))

    # -- leases ------------------------------------------------------------------------------

    def lease_grant(self, ttl_s: int) -> Lease:
        answer = self._call("/v3/lease/grant", {"TTL": str(ttl_s)})
        return Lease(int(answer["ID"]), int(answer.get("TTL", 0)))

    def lease_keepalive(self, lease_id: int) -> int:
        answer = self._call("/v3/lease/keepalive", {"ID": str(lease_id)})
        ttl = int(answer.get("result", answer).get("TTL", 0))
        if ttl <= 0:
            raise LeaseNotFound(f"lease {lease_id:x} is gone")
        return ttl

    def lease_revoke(self, lease_id: int) -> None:
        try:
            self._call("/v3/lease/revoke", {"ID": str(lease_id)})
        except LeaseNotFound:
            pass

    def lease_time_to_live(self, lease_id: int) -> int:
        answer = self._call("/v3/lease/timetolive", {"ID": str(lease_id)})
        return int(answer.get("TTL", -1))

    def status(self) -> dict:
        return self._call("/v3/maintenance/status", {})

    def close(self) -> None:
        """Close every thread's connections; later calls raise EtcdError."""
        self._closed = True
        with self._all_lock:
            connections, self._all = self._all, []
        for connection in connections:
            connection.close()

    def __enter__(self) -> "EtcdClient":
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
