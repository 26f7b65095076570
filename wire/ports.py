"""Which of a broker's ports a failed gRPC call most likely reached, from the call's status alone.

A broker listens on up to four ports: the client and admin API (`listenPort`, gRPC), replication
(`haListenPort`, gRPC with another service), RocketMQ 4.x remoting (`remotingListenPort`, plain TCP
frames) and metrics (`metricsPort`, HTTP/1). A gRPC client pointed at the wrong one gets gRPC's raw
words: "Failed parsing HTTP/2 (Expected SETTINGS frame ...)" from an HTTP/1 server, "Socket
closed" from a server that drops a connection it cannot read (remoting, or a TLS port reached
without TLS), "Method not found!" from a gRPC server of another service. `wrong_port` turns those
into a sentence that names the endpoint given, what it most likely is, and the key of the port
the caller wanted. Pure functions; thread-safe.
"""

from __future__ import annotations

# What each caller wants, by the broker.conf key of the port that serves it.
CLIENT_API = "listenPort"
REPLICATION = "haListenPort"

_HTTP1_SIGNS = ("failed parsing http/2", "expected settings frame", "http/1")
_CLOSED_SIGNS = ("socket closed",)
_NO_SUCH_METHOD = ("method not found",)


def wrong_port(code: str, details: str, endpoint: str, wanted: str = CLIENT_API) -> str | None:
    """What `endpoint` most likely is when a call to it failed with gRPC status `code` (its
    name) and `details`, and where to go instead; None when the failure says nothing of the kind
    (a refused connection, a timeout, an answer of the right service)."""
    text = (details or "").lower()
    serves = "the client and admin API are" if wanted == CLIENT_API else "replication is"
    if code == "UNAVAILABLE" and any(sign in text for sign in _HTTP1_SIGNS):
        return (
            f"{endpoint} answers HTTP/1, not gRPC: it is most likely a broker's metrics port (metricsPort); "
            f"{serves} on the broker's {wanted}"
        )
    if code == "UNAVAILABLE" and any(sign in text for sign in _CLOSED_SIGNS):
        return (
            f"{endpoint} closed the connection without a gRPC answer: if it is a broker's RocketMQ 4.x remoting "
            f"port (remotingListenPort), {serves} on its {wanted}; if the port serves TLS, the caller needs "
            "TLS too (--tls-ca-file)"
        )
    if code == "UNIMPLEMENTED" and any(sign in text for sign in _NO_SUCH_METHOD):
        if wanted == CLIENT_API:
            return (
                f"{endpoint} speaks gRPC but not the client API: it is most likely a broker's replication port "
                f"(haListenPort); the client and admin API are on its {CLIENT_API}"
            )
        return (
            f"{endpoint} speaks gRPC but not replication: it is most likely the master's client port "
            f"(listenPort); replication is on its {REPLICATION} (haMasterAddress must name that one)"
        )
    return None
