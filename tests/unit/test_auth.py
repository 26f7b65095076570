"""The admin API's shared-secret signatures (wire.admin_auth, sans-IO parts) and secrets (wire.auth)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from wire.admin_auth import ANOTHER_BROKER, HEADER, BrokerIdentity, Signer, Verifier
from wire.auth import load_secret

SECRET = b"0123456789abcdef-secret"
METHOD = "/rocketstore.admin.v1.Admin/SetBrokerConfig"
NOW = 1_700_000_000_000
MASTER = BrokerIdentity("ClusterA", "broker-a", 0)
SLAVE = BrokerIdentity("ClusterA", "broker-a", 1)
BODY = b"\n\x1a\n\x15autoCreateTopicEnable\x12\x01true"


def signed(
    method: str = METHOD,
    at_ms: int = NOW,
    secret: bytes = SECRET,
    identity: BrokerIdentity = MASTER,
    body: bytes = BODY,
) -> str:
    return Signer(secret, clock_ms=lambda: at_ms).header(method, identity, body)


def test_a_signed_header_authenticates_one_call_once():
    verifier = Verifier(SECRET, MASTER)
    header = signed()
    assert verifier.check(header, METHOD, BODY, NOW + 10) is None
    assert verifier.check(header, METHOD, BODY, NOW + 20) == "replayed credentials"
    assert verifier.check(signed(), METHOD, BODY, NOW) is None  # a fresh nonce is a fresh call


def test_a_header_is_bound_to_the_broker_and_the_request_body():
    """Issue 30: a SetBrokerConfig header used once on the slave was accepted by the master with
    another body. It is good for one broker and one body now."""
    header = signed(identity=SLAVE)
    assert Verifier(SECRET, SLAVE).check(header, METHOD, BODY, NOW) is None
    refused = Verifier(SECRET, MASTER).check(header, METHOD, BODY, NOW)
    assert refused.startswith(ANOTHER_BROKER) and "ClusterA/broker-a/0" in refused
    other_body = BODY.replace(b"true", b"fals")
    assert Verifier(SECRET, SLAVE).check(signed(identity=SLAVE), METHOD, other_body, NOW).startswith("bad signature")
    # Another cluster with a group of the same name is another broker too.
    twin = BrokerIdentity("ClusterB", "broker-a", 1)
    assert Verifier(SECRET, twin).check(signed(identity=SLAVE), METHOD, BODY, NOW).startswith(ANOTHER_BROKER)


def test_the_identity_tag_does_not_stand_in_for_the_signature():
    version, time_ms, nonce, _tag, signature = signed(identity=SLAVE).split(" ")
    forged = " ".join([version, time_ms, nonce, MASTER.tag(), signature])
    assert Verifier(SECRET, MASTER).check(forged, METHOD, BODY, NOW).startswith("bad signature")


@pytest.mark.parametrize(
    ("header", "method", "now", "reason"),
    [
        (None, METHOD, NOW, "no credentials"),
        ("", METHOD, NOW, "no credentials"),
        ("v2 12 abcdefgh", METHOD, NOW, "malformed credentials"),
        ("v3 " + signed()[3:], METHOD, NOW, "malformed credentials"),
        ("v1 1700000000000 abcdefghijkl " + "0" * 64, METHOD, NOW, "credentials of the v1 scheme"),
        (signed(secret=b"another-secret-of-16+"), METHOD, NOW, "bad signature"),
        (signed(method="/rocketstore.admin.v1.Admin/GetStatus"), METHOD, NOW, "bad signature"),
        (signed(at_ms=NOW - 6 * 60_000), METHOD, NOW, "credentials expired (clock skew or replay)"),
        (signed(at_ms=NOW + 6 * 60_000), METHOD, NOW, "credentials expired (clock skew or replay)"),
    ],
)
def test_refusals_say_why(header, method, now, reason):
    assert Verifier(SECRET, MASTER).check(header, method, BODY, now).startswith(reason)


@given(st.text(max_size=200), st.binary(max_size=64))
def test_garbage_headers_are_refused_never_raise(text, body):
    assert Verifier(SECRET, MASTER).check(text, METHOD, body, NOW) is not None
    assert Verifier(SECRET, MASTER).check(f"v2 {NOW} abcdefghij {MASTER.tag()} {text}", METHOD, body, NOW) is not None


def test_tampered_time_breaks_the_signature():
    version, time_ms, nonce, tag, signature = signed().split(" ")
    forged = " ".join([version, str(int(time_ms) + 1), nonce, tag, signature])
    assert Verifier(SECRET, MASTER).check(forged, METHOD, BODY, NOW).startswith("bad signature")


def test_old_nonces_are_forgotten_after_the_window():
    verifier = Verifier(SECRET, MASTER, max_skew_ms=1000)
    header = signed(at_ms=NOW)
    assert verifier.check(header, METHOD, BODY, NOW) is None
    # Past the window the same header is refused as expired rather than remembered forever.
    assert verifier.check(header, METHOD, BODY, NOW + 5000) == "credentials expired (clock skew or replay)"
    assert verifier.check(signed(at_ms=NOW + 5000), METHOD, BODY, NOW + 5000) is None
    assert len(verifier._seen) == 1  # the first nonce is gone: memory is bounded by the window


def test_secrets_stay_out_of_reprs_and_headers():
    signer, verifier = Signer(SECRET), Verifier(SECRET, MASTER)
    assert SECRET.decode() not in repr(signer) + repr(verifier) + signer.header(METHOD, MASTER, BODY)
    assert signer.metadata(METHOD, MASTER, BODY)[0][0] == HEADER


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
