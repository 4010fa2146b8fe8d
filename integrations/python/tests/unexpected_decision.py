"""Fail closed on an answer that cannot be trusted.

A stand-in sidecar (a real gRPC server on 127.0.0.1, generated servicer)
answers `DecideToolResult` with a mock, which only `DecideToolCall` may
answer; and one answers allow for a call whose local handler it lost
mid-call (`handler_detached`), while the adapter serves that handler. The
tool-call flow must raise `AgentHooksError`, never hand a result to the
model as if it was allowed. Prints `ok` and exits 0, or prints what went
wrong and exits 1.
"""

from __future__ import annotations

import sys
from concurrent import futures
from typing import Any

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


class HandlerLost(Unexpected):
    """Serves a Handle stream, and allows a call whose handler it lost mid-call.

    As the sidecar answers when the stream ends while it waits for the handler's
    reply: allow, with the handler's outcome failed `handler_detached`.
    """

    def Handle(self, request_iterator, context):
        for request in request_iterator:
            if request.WhichOneof("message") == "attach":
                yield service_pb2.HandleResponse(attached=service_pb2.HandleAttached(
                    operation_ids=list(request.attach.operation_ids)))

    def DecideToolCall(self, request, context):
        lost = decisions_pb2.HookOutcome(
            hook_id="mock-weather", status=decisions_pb2.HOOK_OUTCOME_STATUS_FAILED,
            error_code="handler_detached")
        return service_pb2.DecideToolCallResponse(
            decision=decisions_pb2.Decision(allow=decisions_pb2.Allow()), outcomes=[lost])


def refuses(servicer: service_pb2_grpc.HookServiceServicer, handler: Any, expected: str) -> bool:
    """Runs one tool call against `servicer`; true when it raised `expected` and the tool never ran."""
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    service_pb2_grpc.add_HookServiceServicer_to_server(servicer, server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    client = SidecarClient(Settings(target=f"127.0.0.1:{port}", user_id="user-1", timeout=5),
                           handler=handler)
    runs: list[str] = []
    try:
        state = RunState(client).start()
        context = state.tool_context(tool_call_id="call-1", api_name="get_weather",
                                     args={"city": "Paris"}, assistant_message_id=None,
                                     call_index=0, step_index=0)

        def tool(args: dict[str, Any]) -> str:
            runs.append(args["city"])
            return f"sunny in {args['city']}"

        try:
            outcome = state.run_tool_call(context, tool)
        except AgentHooksError as e:
            if expected not in str(e):
                print(f"unexpected error: {e}")
                return False
            return True
        print(f"failed open: the model would read {outcome.content!r}")
        return False
    finally:
        client.close()
        server.stop(None)


def main() -> int:
    if not refuses(Unexpected(), None, "DecideToolResult answered without a decision"):
        return 1
    # With a local handler served, a decision made without it is refused before the tool runs.
    if not refuses(HandlerLost(), lambda call: None, "lost its handler"):
        return 1
    print("ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
