"""Regenerate the Python gRPC code in `wire/rpc/` from the `.proto` files under `proto/`.

    python proto/generate.py [--out DIR]

Output goes to DIR (default: the repository root) under the same relative paths as the sources,
so `proto/wire/rpc/ha.proto` becomes `wire/rpc/ha_pb2.py` and `ha_pb2_grpc.py`.
The output depends only on the sources and the pinned grpcio-tools, which
`tests/unit/test_generated_code.py` checks by regenerating into a temporary directory.
"""

from __future__ import annotations

import argparse
import sys
from importlib import resources
from pathlib import Path

PROTO_ROOT = Path(__file__).resolve().parent
REPO_ROOT = PROTO_ROOT.parent


def sources() -> list[Path]:
    return sorted(PROTO_ROOT.rglob("*.proto"))


def generate(out_dir: Path) -> list[Path]:
    from grpc_tools import protoc

    well_known = resources.files("grpc_tools") / "_proto"
    relative = [str(p.relative_to(PROTO_ROOT)) for p in sources()]
    args = [
        "protoc",
        f"-I{PROTO_ROOT}",
        f"-I{well_known}",
        f"--python_out={out_dir}",
        f"--pyi_out={out_dir}",
        f"--grpc_python_out={out_dir}",
        *relative,
    ]
    if protoc.main(args) != 0:
        raise SystemExit("protoc failed")
    return [out_dir / name for name in outputs()]


def outputs() -> list[str]:
    """The generated files' paths relative to the output directory."""
    names = []
    for source in sources():
        stem = source.relative_to(PROTO_ROOT).with_suffix("")
        names += [f"{stem}_pb2.py", f"{stem}_pb2.pyi", f"{stem}_pb2_grpc.py"]
    return names


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=REPO_ROOT)
    args = parser.parse_args()
    for path in generate(args.out):
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
