"""`Credentials` and the channel interceptors that sign every call with them (RocketMQ 5's
MQv2-HMAC-SHA1 signature, `wire.client_signature`), for brokers with `aclEnable=true`.

Thread-safety: immutable; an interceptor signs each call as it starts.
"""

from __future__ import annotations

from collections import namedtuple
from dataclasses import dataclass, field

import grpc

from wire import client_signature


@dataclass(frozen=True)
class Credentials:
    """An account of the broker's ACL file: its access key and secret key."""

    access_key: str
    secret_key: str = field(repr=False)

    def __post_init__(self) -> None:
        if not self.access_key or not self.secret_key:
            raise ValueError("credentials need an access key and a secret key")


class _Details(
    namedtuple("_Details", ("method", "timeout", "metadata", "credentials", "wait_for_ready", "compression")),
    grpc.ClientCallDetails,
):
    pass


def _signed(credentials: Credentials, metadata) -> list[tuple[str, str]]:
    return [*(metadata or ()), *client_signature.metadata(credentials.access_key, credentials.secret_key)]


class SigningInterceptor(
    grpc.UnaryUnaryClientInterceptor,
    grpc.UnaryStreamClientInterceptor,
    grpc.StreamUnaryClientInterceptor,
    grpc.StreamStreamClientInterceptor,
):
    """For sync channels (`grpc.intercept_channel`)."""

    def __init__(self, credentials: Credentials) -> None:
        self._credentials = credentials

    def _details(self, d):
        return _Details(
            d.method, d.timeout, _signed(self._credentials, d.metadata), d.credentials, d.wait_for_ready, d.compression
        )

    def intercept_unary_unary(self, continuation, client_call_details, request):
        return continuation(self._details(client_call_details), request)

    def intercept_unary_stream(self, continuation, client_call_details, request):
        return continuation(self._details(client_call_details), request)

    def intercept_stream_unary(self, continuation, client_call_details, request_iterator):
        return continuation(self._details(client_call_details), request_iterator)

    def intercept_stream_stream(self, continuation, client_call_details, request_iterator):
        return continuation(self._details(client_call_details), request_iterator)


class AsyncSigningInterceptor(
    grpc.aio.UnaryUnaryClientInterceptor,
    grpc.aio.UnaryStreamClientInterceptor,
    grpc.aio.StreamUnaryClientInterceptor,
    grpc.aio.StreamStreamClientInterceptor,
):
    """For grpc.aio channels (`interceptors=`)."""

    def __init__(self, credentials: Credentials) -> None:
        self._credentials = credentials

    def _details(self, d):
        return grpc.aio.ClientCallDetails(
            d.method, d.timeout, _signed(self._credentials, d.metadata), d.credentials, d.wait_for_ready
        )

    async def intercept_unary_unary(self, continuation, client_call_details, request):
        return await continuation(self._details(client_call_details), request)

    async def intercept_unary_stream(self, continuation, client_call_details, request):
        return await continuation(self._details(client_call_details), request)

    async def intercept_stream_unary(self, continuation, client_call_details, request_iterator):
        return await continuation(self._details(client_call_details), request_iterator)

    async def intercept_stream_stream(self, continuation, client_call_details, request_iterator):
        return await continuation(self._details(client_call_details), request_iterator)
