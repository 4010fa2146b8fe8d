"""Python grpcio client of the bench: sequential unary calls (c=1), timed.

Sends the DecideToolCall request it is given (hex of its wire bytes, the very
message the Node client sends) to `--method` on `--target`, setting a new
fixed-width tool call id per call, and prints one JSON line with the latency
percentiles in milliseconds. With `--echo` it expects the echo baseline's
answer (the request itself) instead of a DecideToolCallResponse.

Messages come from the generated client under clients/python when it is on
PYTHONPATH; otherwise they are generated here, into a temp folder, from
proto/ with grpcio-tools.
"""

import argparse
import glob
import importlib
import json
import os
import sys
import tempfile
import time

import grpc

CALL_TIMEOUT_S = 30
READY_TIMEOUT_S = 10
NS_PER_MS = 1_000_000


def load_service_module(repo_root):
    """Returns the generated service_pb2 module and where it came from."""
    try:
        return importlib.import_module("agenthooks_client.v1.service_pb2"), "clients/python"
    except ImportError:
        pass
    from grpc_tools import protoc
    import grpc_tools

    out = tempfile.mkdtemp(prefix="agenthooks-bench-py-")
    proto_root = os.path.join(repo_root, "proto")
    wkt = os.path.join(os.path.dirname(grpc_tools.__file__), "_proto")
    files = sorted(glob.glob(os.path.join(proto_root, "agenthooks", "v1", "*.proto")))
    code = protoc.main(["protoc", f"-I{proto_root}", f"-I{wkt}", f"--python_out={out}", *files])
    if code != 0:
        raise RuntimeError(f"grpc_tools.protoc failed with {code}")
    sys.path.insert(0, out)
    return importlib.import_module("agenthooks.v1.service_pb2"), "generated at bench time"


def percentile(sorted_ms, p):
    """Nearest-rank percentile of an ascending list."""
    rank = -(-p * len(sorted_ms) // 100)
    return sorted_ms[min(len(sorted_ms), max(1, rank)) - 1]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--target", required=True)
    parser.add_argument("--method", required=True)
    parser.add_argument("--request-hex", required=True)
    parser.add_argument("--echo", action="store_true")
    parser.add_argument("--warmup", type=int, default=500)
    parser.add_argument("--calls", type=int, default=3000)
    parser.add_argument("--repo-root", required=True)
    args = parser.parse_args()

    service_pb2, source = load_service_module(args.repo_root)
    request = service_pb2.DecideToolCallRequest.FromString(bytes.fromhex(args.request_hex))
    response_type = (
        service_pb2.DecideToolCallRequest if args.echo else service_pb2.DecideToolCallResponse
    )
    channel = grpc.insecure_channel(args.target)
    grpc.channel_ready_future(channel).result(timeout=READY_TIMEOUT_S)
    call = channel.unary_unary(
        args.method,
        request_serializer=service_pb2.DecideToolCallRequest.SerializeToString,
        response_deserializer=response_type.FromString,
    )

    i = 0
    first = None
    for _ in range(args.warmup):
        request.event.context.tool_call_id = f"call_{i:08d}"
        i += 1
        response = call(request, timeout=CALL_TIMEOUT_S)
        if first is None:
            first = response
    if not args.echo and first is not None and first.decision.WhichOneof("outcome") != "allow":
        raise RuntimeError(f"expected an allow decision, got {first}")

    samples = []
    for _ in range(args.calls):
        request.event.context.tool_call_id = f"call_{i:08d}"
        i += 1
        started = time.perf_counter_ns()
        call(request, timeout=CALL_TIMEOUT_S)
        samples.append((time.perf_counter_ns() - started) / NS_PER_MS)
    channel.close()
    samples.sort()
    print(
        json.dumps(
            {
                "p50": percentile(samples, 50),
                "p99": percentile(samples, 99),
                "mean": sum(samples) / len(samples),
                "count": len(samples),
                "requestBytes": request.ByteSize(),
                "messages": source,
                "grpcio": grpc.__version__,
            }
        )
    )


if __name__ == "__main__":
    main()
