"""Coordination services for controller mode: etcd (`etcd.EtcdClient`) and, for tests, demos and
benchmarks, a local etcd process (`local_etcd.EtcdServer`)."""

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
