"""Shared-secret authentication of the replication and admin endpoints (sans-IO parts)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from wire.auth import HEADER, Signer, Verifier, load_secret

SECRET = b"0123456789abcdef-secret"
METHOD = "/rocketstore.ha.v1.Replication/Replicate"
NOW = 1_700_000_000_000


def signed(method: str = METHOD, at_ms: int = NOW, secret: bytes = SECRET) -> str:
    return Signer(secret, clock_ms=lambda: at_ms).header(method)


def test_a_signed_header_authenticates_once():
    verifier = Verifier(SECRET)
    header = signed()
    assert verifier.check(header, METHOD, NOW + 10) is None
    assert verifier.check(header, METHOD, NOW + 20) == "replayed credentials"
    assert verifier.check(signed(), METHOD, NOW) is None  # a fresh nonce is a fresh call


@pytest.mark.parametrize(
    ("header", "method", "now", "reason"),
    [
        (None, METHOD, NOW, "no credentials"),
        ("", METHOD, NOW, "no credentials"),
        ("v1 12 abcdefgh", METHOD, NOW, "malformed credentials"),
        ("v2 " + signed()[3:], METHOD, NOW, "malformed credentials"),
        (signed(secret=b"another-secret-of-16+"), METHOD, NOW, "bad signature"),
        (signed(method="/rocketstore.admin.v1.Admin/GetStatus"), METHOD, NOW, "bad signature"),
        (signed(at_ms=NOW - 6 * 60_000), METHOD, NOW, "credentials expired (clock skew or replay)"),
        (signed(at_ms=NOW + 6 * 60_000), METHOD, NOW, "credentials expired (clock skew or replay)"),
    ],
)
def test_refusals_say_why(header, method, now, reason):
    assert Verifier(SECRET).check(header, method, now) == reason


@given(st.text(max_size=200))
def test_garbage_headers_are_refused_never_raise(text):
    assert Verifier(SECRET).check(text, METHOD, NOW) is not None


def test_tampered_time_breaks_the_signature():
    version, time_ms, nonce, signature = signed().split(" ")
    forged = " ".join([version, str(int(time_ms) + 1), nonce, signature])
    assert Verifier(SECRET).check(forged, METHOD, NOW) == "bad signature"


def test_old_nonces_are_forgotten_after_the_window():
    verifier = Verifier(SECRET, max_skew_ms=1000)
    header = signed(at_ms=NOW)
    assert verifier.check(header, METHOD, NOW) is None
    # Past the window the same header is refused as expired rather than remembered forever.
    assert verifier.check(header, METHOD, NOW + 5000) == "credentials expired (clock skew or replay)"
    assert verifier.check(signed(at_ms=NOW + 5000), METHOD, NOW + 5000) is None
    assert len(verifier._seen) == 1  # the first nonce is gone: memory is bounded by the window


def test_secrets_stay_out_of_reprs_and_headers():
    signer, verifier = Signer(SECRET), Verifier(SECRET)
    assert SECRET.decode() not in repr(signer) + repr(verifier) + signer.header(METHOD)
    assert signer.metadata(METHOD)[0][0] == HEADER


def test_load_secret(tmp_path):
    assert load_secret() == b""
    assert load_secret("0123456789abcdefXYZ") == b"0123456789abcdefXYZ"
    path = tmp_path / "secret"
    path.write_text("from-a-file-0123456789\n")
    path.chmod(0o600)
    assert load_secret(secret_file=str(path)) == b"from-a-file-0123456789"
    with pytest.raises(ValueError, match="at least 16 bytes"):
        load_secret("short")
    with pytest.raises(FileNotFoundError):
        load_secret(secret_file=str(tmp_path / "missing"))


@pytest.mark.parametrize("mode", [0o640, 0o604, 0o660, 0o644, 0o666])
def test_a_secret_file_others_may_read_or_write_is_refused(tmp_path, mode):
    path = tmp_path / "secret"
    path.write_text("from-a-file-0123456789\n")
    path.chmod(mode)
    with pytest.raises(ValueError, match=f"mode {mode:o}.*chmod 600"):
        load_secret(secret_file=str(path))
    path.chmod(0o400)
    assert load_secret(secret_file=str(path)) == b"from-a-file-0123456789"
