"""The edge fuzzer's inputs (`bench.edge`): a seed gives the same requests, mutations change
requests without touching their input, authenticated admin calls are made harmless, and the log
scan counts tracebacks by their first and last lines."""

from __future__ import annotations

import random

from bench.edge.grpc_calls import METHODS, AdminAuth
from bench.edge.grpc_inputs import FuzzContext, defang, defang_bytes, valid_request
from bench.edge.mutation import mutate_bytes, mutate_message
from bench.edge.observe import scan_lines
from bench.edge.remoting_inputs import SERVED, encodable, mutate_command, raw_frame, valid_command
from wire import admin_auth
from wire.auth import wall_clock_ms
from wire.remoting import FrameDecoder, RemotingProtocolError
from wire.rpc import admin_pb2

NOW_MS = 1_790_000_000_000


def grpc_requests(seed: int, n: int = 300) -> list[bytes]:
    rng = random.Random(seed)
    ctx = FuzzContext(msg_ids=["ABC"], receipts=[("g", "t", "m", "0.0.0.0.00")], now_ms=NOW_MS)
    out = []
    for _ in range(n):
        method = rng.choice(sorted(METHODS.values(), key=lambda m: m.path))
        for request in valid_request(method.service, method.name, rng, ctx):
            changed = mutate_message(request, rng, ctx.known())
            out.append(mutate_bytes(changed.SerializeToString(), rng))
    return out


def test_a_seed_gives_the_same_grpc_requests_and_another_seed_others():
    assert grpc_requests(5) == grpc_requests(5)
    assert grpc_requests(5) != grpc_requests(6)


def test_a_seed_gives_the_same_remoting_frames():
    def frames(seed: int) -> list[bytes | None]:
        rng, ctx = random.Random(seed), FuzzContext(now_ms=NOW_MS)
        out = []
        for opaque in range(300):
            command = mutate_command(valid_command(rng.choice(SERVED), opaque, rng, ctx), rng, ctx.known())
            frame = encodable(command)
            out.append(frame if frame is None else raw_frame(frame, rng))
        return out

    assert frames(9) == frames(9)


def test_a_mutation_leaves_its_input_unchanged_and_valid_frames_decode():
    rng, ctx = random.Random(1), FuzzContext()
    request = valid_request("MessagingService", "SendMessage", rng, ctx)[0]
    before = request.SerializeToString()
    for _ in range(50):
        mutate_message(request, rng, ctx.known())
    assert request.SerializeToString() == before
    for code in SERVED:
        command = valid_command(code, 7, rng, ctx)
        [decoded] = FrameDecoder().feed(encodable(command))
        assert (decoded.code, decoded.opaque, dict(decoded.ext_fields)) == (code, 7, dict(command.ext_fields))


def test_raw_frames_are_refused_waited_for_or_decoded_by_the_frame_decoder():
    rng, ctx = random.Random(2), FuzzContext()
    outcomes = set()
    for opaque in range(200):
        frame = encodable(valid_command(rng.choice(SERVED), opaque, rng, ctx))
        damaged = raw_frame(frame, rng)
        try:
            FrameDecoder().feed(damaged)
            outcomes.add("decoded or waited for")
        except RemotingProtocolError:
            outcomes.add("refused")
    assert outcomes == {"decoded or waited for", "refused"}


def test_an_authenticated_admin_call_never_elects_takes_over_or_deletes_the_fuzzers_topics():
    assert defang("ElectMaster", admin_pb2.ElectMasterRequest(broker_id=1)).broker_id == 99
    assert defang("TakeOver", admin_pb2.TakeOverRequest(role="SYNC_MASTER")).role == "SLAVE"
    assert defang("DeleteTopic", admin_pb2.DeleteTopicRequest(topic="FuzzHealth")).topic == "FuzzScratch0"
    config = defang("SetBrokerConfig", admin_pb2.SetBrokerConfigRequest(values={"brokerPermission": "2", "x": "1"}))
    assert dict(config.values) == {"x": "1"}
    raw = admin_pb2.TakeOverRequest(role="ASYNC_MASTER").SerializeToString()
    assert (
        admin_pb2.TakeOverRequest.FromString(defang_bytes(admin_pb2.TakeOverRequest, "TakeOver", raw)).role == "SLAVE"
    )
    assert defang_bytes(admin_pb2.TakeOverRequest, "TakeOver", b"\xff\xff") == b"\xff\xff"


def test_the_log_scan_counts_tracebacks_by_first_and_last_line():
    lines = [
        "2026-11-26T19:37:45.383+00:00 ERROR MainThread rocketstore.broker.messaging: PullMessage failed at 123\n",
        "Traceback (most recent call last):\n",
        '  File "x.py", line 1, in f\n',
        "ValueError: bad 7\n",
        "\n",
        "During handling of the above exception, another exception occurred:\n",
        "\n",
        "Traceback (most recent call last):\n",
        '  File "y.py", line 2, in g\n',
        "KeyError: 'k'\n",
        "2026-11-26T19:37:46.000+00:00 WARNING MainThread wire.auth: refused\n",
        "2026-11-26T19:37:47.383+00:00 ERROR MainThread rocketstore.broker.messaging: PullMessage failed at 456\n",
        "Traceback (most recent call last):\n",
        '  File "x.py", line 1, in f\n',
        "KeyError: 'k'\n",
        "Exception in thread worker:\n",
        "Traceback (most recent call last):\n",
        "RuntimeError: boom\n",
    ]
    scan = scan_lines(lines)
    assert scan.tracebacks == 3 and scan.warnings == 1 and scan.errors == 2
    first = "ERROR rocketstore.broker.messaging: PullMessage failed at #"
    assert scan.distinct == {(first, "KeyError: 'k'"): 2, ("Exception in thread worker:", "RuntimeError: boom"): 1}


def test_only_the_signed_and_first_replayed_headers_authenticate_a_call():
    secret = b"a-secret-of-sixteen-bytes"
    identity = admin_auth.BrokerIdentity("FuzzCluster", "broker-a", 0)
    verifier = admin_auth.Verifier(secret, identity)
    signer = AdminAuth(secret, identity, random.Random(4))
    path = "/rocketstore.admin.v1.Admin/ElectMaster"
    body = admin_pb2.ElectMasterRequest(broker_id=99).SerializeToString()
    now = wall_clock_ms()

    def refusal(mode: str) -> str | None:
        metadata, sent = signer.sign(mode, path, body)
        return verifier.check(dict(metadata).get(admin_auth.HEADER), path, sent, now)

    # Each way of failing is refused for its own reason, not by a check that happens to come first.
    reasons = {
        "none": "no credentials",
        "wrong-secret": "bad signature",
        "other-method": "bad signature",
        "other-body": "bad signature",
        "other-broker": admin_auth.ANOTHER_BROKER,
        "stale": "credentials expired",
    }
    for _ in range(200):  # each draws among methods, bodies, brokers and ages: never the call's own
        for mode, reason in reasons.items():
            refused = refusal(mode)
            assert refused is not None and refused.startswith(reason), (mode, refused)
        refused = refusal("malformed")
        assert refused is not None and ("malformed" in refused or "v1" in refused), refused
    assert refusal("signed") is None and refusal("replayed") == "replayed credentials"
    fresh = AdminAuth(secret, identity, random.Random(5))
    metadata, sent = fresh.sign("replayed", path, body)  # nothing to replay yet: a signed call
    assert verifier.check(dict(metadata)[admin_auth.HEADER], path, sent, now) is None
