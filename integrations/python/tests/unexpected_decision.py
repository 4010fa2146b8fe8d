"""Fail closed on an answer the contract never gives.

A stand-in sidecar (a real gRPC server on 127.0.0.1, generated servicer)
answers `DecideToolResult` with a mock, which only `DecideToolCall` may
answer. The tool-call flow must raise `AgentHooksError`, never hand the
tool's result to the model as if it was allowed. Prints `ok` and exits 0,
or prints what went wrong and exits 1.
"""

from __future__ import annotations

import sys
from concurrent import futures

import grpc

from agenthooks_client.v1 import decisions_pb2, events_pb2, service_pb2, service_pb2_grpc
from agenthooks_integrations.core import AgentHooksError, RunState, Settings, SidecarClient


class Unexpected(service_pb2_grpc.HookServiceServicer):
    """Allows the call, then answers its result with a mock."""

    def Modify(self, request, context):
        return service_pb2.ModifyResponse(result_json="{}")

    def DecideToolCall(self, request, context):
        return service_pb2.DecideToolCallResponse(
            decision=decisions_pb2.Decision(allow=decisions_pb2.Allow()))

    def DecideToolResult(self, request, context):
        mock = decisions_pb2.Mock(result=events_pb2.ToolResult(content="not a result control's"))
        return service_pb2.DecideToolResultResponse(decision=decisions_pb2.Decision(mock=mock))

    def Dispatch(self, request, context):
        return service_pb2.DispatchResponse()


def main() -> int:
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    service_pb2_grpc.add_HookServiceServicer_to_server(Unexpected(), server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    client = SidecarClient(Settings(target=f"127.0.0.1:{port}", timeout=5))
    try:
        state = RunState(client).start()
        context = state.tool_context(tool_call_id="call-1", api_name="get_weather",
                                     args={"city": "Paris"}, assistant_message_id=None,
                                     call_index=0, step_index=0)
        try:
            outcome = state.run_tool_call(context, lambda args: f"sunny in {args['city']}")
        except AgentHooksError as e:
            if "DecideToolResult answered without a decision" not in str(e):
                print(f"unexpected error: {e}")
                return 1
            print("ok")
            return 0
        print(f"failed open: the model would read {outcome.content!r}")
        return 1
    finally:
        client.close()
        server.stop(None)


if __name__ == "__main__":
    sys.exit(main())
