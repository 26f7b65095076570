"""The generated gRPC code in wire/rpc is what `make proto` makes from proto/ now."""

import importlib.util
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def _generator():
    spec = importlib.util.spec_from_file_location("proto_generate", REPO / "proto" / "generate.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_generated_code_is_fresh(tmp_path):
    generator = _generator()
    generator.generate(tmp_path)
    names = generator.outputs()
    assert names, "no .proto sources found"
    stale = [n for n in names if not (REPO / n).exists() or (REPO / n).read_bytes() != (tmp_path / n).read_bytes()]
    assert not stale, f"generated code is stale, run `make proto`: {stale}"
    committed = {str(p.relative_to(REPO)) for p in (REPO / "wire" / "rpc").glob("*_pb2*")}
    assert committed == set(names), f"generated files without a source: {sorted(committed - set(names))}"


def test_messaging_service_keeps_rocketmq_names():
    from wire.rpc import messaging_pb2

    service = messaging_pb2.DESCRIPTOR.services_by_name["MessagingService"]
    assert service.full_name == "apache.rocketmq.v2.MessagingService"
    assert messaging_pb2.Code.Value("SLAVE_PERSISTENCE_TIMEOUT") == 50402
    assert messaging_pb2.SendResultEntry.DESCRIPTOR.fields_by_name["offset"].number == 4
    assert sys.modules["wire.rpc.messaging_pb2"] is messaging_pb2
