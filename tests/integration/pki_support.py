"""A throwaway certificate authority for the TLS tests (openssl on PATH)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path


def _openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True, timeout=60)


def make_ca(directory: Path, name: str) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    _openssl(
        "req",
        "-x509",
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:prime256v1",
        "-nodes",
        "-keyout",
        f"{name}.key",
        "-out",
        f"{name}.crt",
        "-days",
        "2",
        "-subj",
        f"/CN={name}",
        cwd=directory,
    )


def make_cert(directory: Path, ca: str, name: str) -> None:
    _openssl(
        "req",
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:prime256v1",
        "-nodes",
        "-keyout",
        f"{name}.key",
        "-out",
        f"{name}.csr",
        "-subj",
        f"/CN={name}",
        cwd=directory,
    )
    ext = directory / f"{name}.ext"
    ext.write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\n")
    _openssl(
        "x509",
        "-req",
        "-in",
        f"{name}.csr",
        "-CA",
        f"{ca}.crt",
        "-CAkey",
        f"{ca}.key",
        "-CAcreateserial",
        "-out",
        f"{name}.crt",
        "-days",
        "2",
        "-extfile",
        ext.name,
        cwd=directory,
    )
    os.chmod(directory / f"{name}.key", 0o600)


def tls_broker_settings(directory: Path) -> dict[str, str]:
    """A CA ("ca.crt" in `directory`) and a broker certificate for 127.0.0.1 signed by it: the
    settings that turn TLS on for a broker's client API."""
    make_ca(directory, "ca")
    make_cert(directory, "ca", "broker")
    return {
        "tlsEnable": "true",
        "tlsServerCertPath": str(directory / "broker.crt"),
        "tlsServerKeyPath": str(directory / "broker.key"),
    }
