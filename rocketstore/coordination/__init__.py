"""Coordination services for controller mode and clusters of groups: the etcd client
(`etcd.EtcdClient`), cluster routes (`cluster_routes`) and the registrar (`cluster_registrar`).
Tests and benchmarks start a local etcd with `harness.local_etcd`."""

from .etcd import (
    Compare,
    Delete,
    EtcdClient,
    EtcdError,
    EtcdUnavailable,
    Get,
    KeyValue,
    Lease,
    LeaseNotFound,
    Put,
    RangeResult,
    TxnResult,
)

__all__ = [
    "Compare",
    "Delete",
    "EtcdClient",
    "EtcdError",
    "EtcdUnavailable",
    "Get",
    "KeyValue",
    "Lease",
    "LeaseNotFound",
    "Put",
    "RangeResult",
    "TxnResult",
]
