"""Generates the Python client, clients/python/agenthooks_client, from proto/agenthooks/v1.

Run by scripts/generate-clients.sh with the Python of .venv, where
clients/python/requirements.txt installed grpcio-tools. protoc names each Python
module after its proto path (`agenthooks.v1.events_pb2`); the client's package is
`agenthooks_client.v1`, so the module names and the `from agenthooks.v1 import`
lines that protoc writes are rewritten to it. The serialized descriptors are not
touched: the proto files are still registered as `agenthooks/v1/*.proto`, the
names the sidecar uses.

proto/google/rpc (google.rpc.Status and the error details) is not generated:
the generated code imports `google.rpc.status_pb2` from googleapis-common-protos,
so a runtime decodes agenthooks errors with the standard modules and no second
copy of them clashes in the protobuf registry. Our .proto copies must therefore
be upstream's schema exactly; this script checks them against the descriptors
that googleapis-common-protos registers and fails when they differ.
"""

from __future__ import annotations

import re
import shutil
import sys
import tempfile
from importlib import resources
from pathlib import Path

from google.protobuf import descriptor_pb2
from google.rpc import error_details_pb2, status_pb2
from grpc_tools import protoc

ROOT = Path(__file__).resolve().parent.parent
PROTO_ROOT = ROOT / "proto"
SOURCES = sorted((PROTO_ROOT / "agenthooks" / "v1").glob("*.proto"))
PACKAGE = ROOT / "clients" / "python" / "agenthooks_client"

# Our copies of upstream files, and the googleapis-common-protos module that
# registers each.
UPSTREAM = {
    "google/rpc/status.proto": status_pb2,
    "google/rpc/error_details.proto": error_details_pb2,
}

# `from agenthooks.v1 import x_pb2` and the module names `'agenthooks.v1.x_pb2'`
# given to the descriptor builder. Proto type names never end in `_pb2`.
MODULE_REFERENCE = re.compile(r"\bagenthooks\.v1(?=\s+import\b|\.\w+_pb2(?:_grpc)?\b)")

# A gRPC module holds a `class XStub` for each service of its file.
SERVICE_STUB = re.compile(r"^class \w+Stub\b", re.MULTILINE)

PACKAGE_INIT = '''"""agenthooks gRPC client, generated from proto/agenthooks/v1. DO NOT EDIT.

Regenerate with `npm run generate:clients`. The modules are in agenthooks_client.v1:
`service_pb2_grpc.HookServiceStub`, the messages of events_pb2, hooks_pb2,
decisions_pb2 and service_pb2, and in errors_pb2 the enum ErrorReason, whose
value names are the `google.rpc.ErrorInfo` reasons agenthooks sends. Status and
the error details are googleapis-common-protos' `google.rpc` modules.
"""
'''

V1_INIT = '''"""Messages and stubs of the proto package agenthooks.v1. Generated; DO NOT EDIT."""
'''


def upstream_mismatches(include: object) -> list[str]:
    """Names the files of UPSTREAM whose schema differs from googleapis-common-protos'."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "google-rpc.binpb"
        args = [
            "grpc_tools.protoc",
            f"--proto_path={PROTO_ROOT}",
            f"--proto_path={include}",
            f"--descriptor_set_out={out}",
            *UPSTREAM,
        ]
        if protoc.main(args) != 0:
            return list(UPSTREAM)
        ours = descriptor_pb2.FileDescriptorSet.FromString(out.read_bytes())
    mismatches = []
    for file in ours.file:
        # protoc fills json_name; the descriptors that Python registers leave it out.
        for message in file.message_type:
            clear_json_names(message)
        theirs = descriptor_pb2.FileDescriptorProto.FromString(
            UPSTREAM[file.name].DESCRIPTOR.serialized_pb
        )
        if file != theirs:
            mismatches.append(file.name)
    return mismatches


def clear_json_names(message: descriptor_pb2.DescriptorProto) -> None:
    for field in message.field:
        field.ClearField("json_name")
    for nested in message.nested_type:
        clear_json_names(nested)


def main() -> int:
    include = resources.files("grpc_tools") / "_proto"
    mismatches = upstream_mismatches(include)
    if mismatches:
        for name in mismatches:
            print(
                f"proto/{name} differs from googleapis-common-protos' {name}: "
                "keep its schema (package, options, messages, fields) upstream's",
                file=sys.stderr,
            )
        return 1
    with tempfile.TemporaryDirectory() as tmp:
        args = [
            "grpc_tools.protoc",
            f"--proto_path={PROTO_ROOT}",
            f"--proto_path={include}",
            f"--python_out={tmp}",
            f"--pyi_out={tmp}",
            f"--grpc_python_out={tmp}",
            *(str(p) for p in SOURCES),
        ]
        if protoc.main(args) != 0:
            print("grpc_tools.protoc failed", file=sys.stderr)
            return 1
        generated = sorted((Path(tmp) / "agenthooks" / "v1").iterdir())
        shutil.rmtree(PACKAGE, ignore_errors=True)
        (PACKAGE / "v1").mkdir(parents=True)
        (PACKAGE / "__init__.py").write_text(PACKAGE_INIT)
        # PEP 561: type checkers read the package's .pyi stubs only with this marker.
        (PACKAGE / "py.typed").write_text("")
        (PACKAGE / "v1" / "__init__.py").write_text(V1_INIT)
        for path in generated:
            if path.name.endswith("_pb2_grpc.py") and not SERVICE_STUB.search(path.read_text()):
                continue  # protoc writes a gRPC module without stubs for each file without a service
            text = MODULE_REFERENCE.sub("agenthooks_client.v1", path.read_text())
            (PACKAGE / "v1" / path.name).write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
