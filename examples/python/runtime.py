"""An agent runtime in Python that runs one whole operation against the agenthooks sidecar.

It uses the generated gRPC client (clients/python/agenthooks_client) over native
gRPC, and does what a runtime does:

0. registers a hook with an invalid webhook URL, on purpose, and prints the
   ErrorInfo reason and the BadRequest field violations of the error it gets;
1. registers the operation's hooks: a webhook control that the receiver answers
   (it denies fs/deleteFile), a local handler that mocks web/search, and
   notification webhooks for the steps, the tool results and the completion;
2. serves the local handler over the Handle stream, on its own thread, and
   opens the operation's DispatchStream for the events it does not wait for;
3. dispatches beforeStep, decides three tool calls (fs/readFile is allowed and
   runs on the client, so its result arrives later: the call is parked;
   fs/deleteFile is denied; web/search is mocked), sends the afterToolCall
   notifications of the denied and the mocked call on the stream, waits for
   their acks and dispatches afterStep;
4. publishes the parked call's result and completes the operation.

As the spec's producers do, it awaits the step events (Dispatch) and the
terminal ones (CompleteOperation), and does not wait for the tool events: they
go on the stream, which keeps their order, so the receiver sees them in order.

It prints one JSON line per step and exits 1 on any error.

Environment: AGENTHOOKS_ADDRESS (host:port or unix:/path, default 127.0.0.1:50051),
RECEIVER_URL (the webhook receiver, default http://127.0.0.1:9000) and
AGENTHOOKS_OPERATION_ID (default op-example).

    PYTHONPATH=clients/python .venv/bin/python examples/python/runtime.py
"""

from __future__ import annotations

import json
import os
import queue
import sys
import threading
from dataclasses import dataclass
from typing import Any

import grpc
from google.protobuf import struct_pb2
from google.rpc import error_details_pb2
from grpc_status import rpc_status

from agenthooks_client.v1 import (
    decisions_pb2,
    events_pb2,
    hooks_pb2,
    service_pb2,
    service_pb2_grpc,
)

ADDRESS = os.environ.get("AGENTHOOKS_ADDRESS", "127.0.0.1:50051")
RECEIVER_URL = os.environ.get("RECEIVER_URL", "http://127.0.0.1:9000").rstrip("/")
OPERATION_ID = os.environ.get("AGENTHOOKS_OPERATION_ID", "op-example")
AGENT_ID = "agent-example"
USER_ID = "user-example"
# Every call gets a deadline: a sidecar that does not answer is an error, never an allow.
TIMEOUT_SECONDS = 10.0

SEARCH_RESULT = '{"results":[{"title":"agenthooks","url":"https://example.com/agenthooks"}]}'
READ_RESULT = "- [x] write the examples\n- [ ] ship v1\n"

_print_lock = threading.Lock()


def emit(**line: Any) -> None:
    """Prints one JSON line (the handler thread prints too)."""
    with _print_lock:
        print(json.dumps(line, separators=(",", ":")), flush=True)


def event_name(event: events_pb2.HookEvent) -> str:
    """The hook type literal of an event, such as `beforeStep`."""
    return event.DESCRIPTOR.fields_by_name[event.WhichOneof("event")].json_name


def struct(value: dict[str, Any]) -> struct_pb2.Struct:
    s = struct_pb2.Struct()
    s.update(value)
    return s


def outcomes(items: Any) -> list[str]:
    """Formats hook outcomes as `hookId:status`, such as `steps-before:delivered`."""
    name = decisions_pb2.HookOutcomeStatus.Name
    return [f"{o.hook_id}:{name(o.status).removeprefix('HOOK_OUTCOME_STATUS_').lower()}" for o in items]


@dataclass
class ToolCall:
    context: events_pb2.ToolCallContext
    # True when the tool runs elsewhere and its result arrives later (parked).
    deferred: bool = False

    @property
    def tool(self) -> str:
        return f"{self.context.identifier}/{self.context.api_name}"


def tool_call(name: str, identifier: str, api_name: str, args: dict[str, Any], index: int,
              executor: int) -> events_pb2.ToolCallContext:
    return events_pb2.ToolCallContext(
        tool_call_id=f"{OPERATION_ID}-call-{name}",
        assistant_message_id=f"{OPERATION_ID}-msg-1",
        identifier=identifier,
        api_name=api_name,
        args=struct(args),
        call_index=index,
        step_index=0,
        operation_id=OPERATION_ID,
        executor=executor,
        agent_id=AGENT_ID,
        user_id=USER_ID,
    )


def hooks() -> list[hooks_pb2.Hook]:
    def notify(hook_id: str, hook_type: int) -> hooks_pb2.Hook:
        return hooks_pb2.Hook(id=hook_id, type=hook_type,
                              webhook=hooks_pb2.Webhook(url=f"{RECEIVER_URL}/events"))

    return [
        # A control: the receiver's {"decision": "deny"} blocks the call; if the
        # receiver fails, the call is blocked too (onError: block).
        hooks_pb2.Hook(
            id="deny-delete",
            type=events_pb2.HOOK_TYPE_BEFORE_TOOL_CALL,
            webhook=hooks_pb2.Webhook(
                url=f"{RECEIVER_URL}/control",
                response_handling=hooks_pb2.RESPONSE_HANDLING_TOOL_CALL,
                on_error=hooks_pb2.ON_ERROR_BLOCK,
            ),
        ),
        # A local handler, served over the Handle stream below.
        hooks_pb2.Hook(id="mock-search", type=events_pb2.HOOK_TYPE_BEFORE_TOOL_CALL,
                       matcher="^web/search$", handler=True),
        notify("steps-before", events_pb2.HOOK_TYPE_BEFORE_STEP),
        notify("steps-after", events_pb2.HOOK_TYPE_AFTER_STEP),
        notify("tool-results", events_pb2.HOOK_TYPE_AFTER_TOOL_CALL),
        notify("completed", events_pb2.HOOK_TYPE_ON_COMPLETE),
    ]


class HandlerStream:
    """Serves the runtime's local handlers over the Handle stream, on its own thread.

    Dispatch and DecideToolCall wait for the handler's reply, so the stream must
    not be served by the thread that makes those calls.
    """

    def __init__(self, stub: service_pb2_grpc.HookServiceStub, operation_ids: list[str]) -> None:
        self._outbox: queue.Queue[service_pb2.HandleRequest | None] = queue.Queue()
        self._attached = threading.Event()
        self.error: grpc.RpcError | None = None
        self._outbox.put(service_pb2.HandleRequest(
            attach=service_pb2.HandleAttach(operation_ids=operation_ids)))
        self._responses = stub.Handle(self._requests())
        self._thread = threading.Thread(target=self._serve, name="agenthooks-handlers", daemon=True)
        self._thread.start()

    def _requests(self):
        while (request := self._outbox.get()) is not None:
            yield request

    def _serve(self) -> None:
        try:
            for message in self._responses:
                kind = message.WhichOneof("message")
                if kind == "attached":
                    emit(step="Handle.attached", operationIds=list(message.attached.operation_ids))
                    self._attached.set()
                elif kind == "call":
                    self._outbox.put(service_pb2.HandleRequest(reply=self._run(message.call)))
                elif kind == "replaced":
                    emit(step="Handle.replaced", operationIds=list(message.replaced.operation_ids))
        except grpc.RpcError as e:
            self.error = e
        finally:
            self._attached.set()

    def _run(self, call: service_pb2.HandlerCall) -> service_pb2.HandlerReply:
        """The handler: mocks web/search, and is done with anything else."""
        event = call.event
        if event.WhichOneof("event") == "before_tool_call":
            context = event.before_tool_call.context
            tool = f"{context.identifier}/{context.api_name}"
            if call.hook_id == "mock-search" and tool == "web/search":
                emit(step="Handle.call", hookId=call.hook_id, tool=tool, reply="mock")
                return service_pb2.HandlerReply(
                    call_id=call.call_id,
                    mock=service_pb2.HandlerMock(
                        result=events_pb2.ToolResult(content=SEARCH_RESULT, success=True)),
                )
        emit(step="Handle.call", hookId=call.hook_id, event=event_name(event), reply="done")
        return service_pb2.HandlerReply(call_id=call.call_id, done=service_pb2.HandlerDone())

    def wait_attached(self) -> None:
        if not self._attached.wait(TIMEOUT_SECONDS):
            raise TimeoutError("the sidecar did not confirm the Handle attachment")
        self._raise_if_failed()

    def close(self) -> None:
        """Half-closes the stream and waits until the sidecar ended it."""
        self._outbox.put(None)
        self._thread.join(TIMEOUT_SECONDS)
        if self._thread.is_alive():
            raise TimeoutError("the Handle stream did not end")
        self._raise_if_failed()

    def _raise_if_failed(self) -> None:
        if self.error is not None:
            raise self.error


def error_details(
    error: grpc.RpcError,
) -> tuple[str, list[error_details_pb2.BadRequest.FieldViolation]]:
    """Reads the ErrorInfo reason and the BadRequest field violations of an error from the sidecar.

    They are in the google.rpc.Status of the call's trailers (grpc-status-details-bin),
    which grpcio-status decodes.
    """
    reason = ""
    violations: list[error_details_pb2.BadRequest.FieldViolation] = []
    status = rpc_status.from_call(error)
    for detail in status.details if status is not None else []:
        if detail.Is(error_details_pb2.ErrorInfo.DESCRIPTOR):
            info = error_details_pb2.ErrorInfo()
            detail.Unpack(info)
            reason = info.reason
        elif detail.Is(error_details_pb2.BadRequest.DESCRIPTOR):
            bad_request = error_details_pb2.BadRequest()
            detail.Unpack(bad_request)
            violations = list(bad_request.field_violations)
    return reason, violations


def register_invalid_hook(stub: service_pb2_grpc.HookServiceStub) -> None:
    """Registers a hook with an invalid webhook URL, on purpose, and prints what the error says."""
    invalid = hooks_pb2.Hook(id="invalid-url", type=events_pb2.HOOK_TYPE_AFTER_STEP,
                             webhook=hooks_pb2.Webhook(url="ftp://example.com/hook"))
    try:
        stub.RegisterHooks(
            service_pb2.RegisterHooksRequest(operation_id=OPERATION_ID, hooks=[invalid]),
            timeout=TIMEOUT_SECONDS,
        )
    except grpc.RpcError as e:
        reason, violations = error_details(e)
        emit(step="RegisterHooks.refused", code=e.code().value[0], reason=reason,
             fields=[{"field": v.field, "description": v.description} for v in violations])
        return
    raise RuntimeError("the sidecar registered a hook with an invalid webhook URL")


class Notifier:
    """Sends the events a runtime does not wait for on the operation's DispatchStream.

    `notify` returns at once; the acks are read on their own thread. The stream
    keeps one operation's events in order, but not with Dispatch calls: `flush`
    waits for the acks of the events sent so far.
    """

    def __init__(self, stub: service_pb2_grpc.HookServiceStub) -> None:
        self._outbox: queue.Queue[service_pb2.DispatchStreamRequest | None] = queue.Queue()
        self._progress = threading.Condition()
        self._sent = 0
        self._acked = 0
        self._ended = False
        self.error: grpc.RpcError | None = None
        # The stream lives as long as the operation, so it has no deadline.
        self._acks = stub.DispatchStream(self._requests())
        self._thread = threading.Thread(target=self._read, name="agenthooks-notify", daemon=True)
        self._thread.start()

    def _requests(self):
        while (request := self._outbox.get()) is not None:
            yield request

    def notify(self, event: events_pb2.HookEvent, **details: Any) -> None:
        with self._progress:
            self._sent += 1
            event_id = f"event-{self._sent}"
        emit(step="DispatchStream.send", eventId=event_id, event=event_name(event), **details)
        self._outbox.put(service_pb2.DispatchStreamRequest(event_id=event_id, event=event))

    def _read(self) -> None:
        try:
            for ack in self._acks:
                if ack.HasField("error"):
                    # A failed notification is logged; the operation goes on.
                    emit(step="DispatchStream.ack", eventId=ack.event_id,
                         error=f"{ack.error.reason}: {ack.error.message}")
                else:
                    emit(step="DispatchStream.ack", eventId=ack.event_id,
                         outcomes=outcomes(ack.outcomes))
                with self._progress:
                    self._acked += 1
                    self._progress.notify_all()
        except grpc.RpcError as e:
            self.error = e
        finally:
            with self._progress:
                self._ended = True
                self._progress.notify_all()

    def flush(self) -> None:
        """Waits until every event sent so far is acknowledged."""
        with self._progress:
            done = self._progress.wait_for(lambda: self._acked >= self._sent or self._ended,
                                           TIMEOUT_SECONDS)
        if not done:
            raise TimeoutError("the sidecar did not acknowledge the notifications")
        self._raise_if_failed()
        if self._acked < self._sent:
            raise RuntimeError("the DispatchStream ended before every event was acknowledged")

    def close(self) -> None:
        """Half-closes the stream and waits until the sidecar ended it, every event acknowledged."""
        self._outbox.put(None)
        self._thread.join(TIMEOUT_SECONDS)
        if self._thread.is_alive():
            raise TimeoutError("the DispatchStream did not end")
        self.flush()

    def _raise_if_failed(self) -> None:
        if self.error is not None:
            raise self.error


class Runtime:
    def __init__(self, stub: service_pb2_grpc.HookServiceStub, notifier: Notifier) -> None:
        self.stub = stub
        self.notifier = notifier
        self.parked: list[ToolCall] = []

    def dispatch(self, event: events_pb2.HookEvent) -> None:
        """Dispatches an event the runtime awaits (beforeStep, afterStep)."""
        res = self.stub.Dispatch(service_pb2.DispatchRequest(event=event), timeout=TIMEOUT_SECONDS)
        emit(step="Dispatch", event=event_name(event), outcomes=outcomes(res.outcomes))

    def after_tool_call(self, call: ToolCall, result: events_pb2.ToolResult, mocked: bool) -> None:
        """Notifies the tool's result without waiting, as the spec's producers do."""
        event = events_pb2.HookEvent(after_tool_call=events_pb2.AfterToolCallEvent(
            context=call.context, mocked=mocked, result=result))
        self.notifier.notify(event, tool=call.tool)

    def decide(self, call: ToolCall) -> None:
        """Asks the sidecar before the tool runs, and does what the decision says."""
        res = self.stub.DecideToolCall(
            service_pb2.DecideToolCallRequest(
                event=events_pb2.BeforeToolCallEvent(context=call.context)),
            timeout=TIMEOUT_SECONDS,
        )
        outcome = res.decision.WhichOneof("outcome")
        if outcome == "deny":
            # The tool does not run; the blocked result is what the runtime stores,
            # and its afterToolCall notification still goes out (mocked: false).
            deny = res.decision.deny
            emit(step="DecideToolCall", tool=call.tool, decision="deny", reason=deny.reason)
            self.after_tool_call(call, deny.blocked_result, mocked=False)
        elif outcome == "mock":
            # The tool does not run; the handler's result stands in for it.
            mock = res.decision.mock
            emit(step="DecideToolCall", tool=call.tool, decision="mock", hookId=mock.hook_id)
            self.after_tool_call(call, mock.result, mocked=True)
        elif outcome == "allow":
            emit(step="DecideToolCall", tool=call.tool, decision="allow")
            if not call.deferred:
                raise RuntimeError(f"{call.tool} would run here; this example runs no tool itself")
            # The client runs the tool; its result arrives later. Park the call so
            # that the publication works on any sidecar, after any restart.
            parked = self.stub.ParkToolCall(
                service_pb2.ParkToolCallRequest(context=call.context,
                                                kind=service_pb2.PARK_KIND_DEFERRED),
                timeout=TIMEOUT_SECONDS,
            )
            emit(step="ParkToolCall", toolCallId=call.context.tool_call_id, created=parked.created)
            self.parked.append(call)
        else:
            raise RuntimeError("DecideToolCall answered without a decision")

    def publish(self, call: ToolCall, result: events_pb2.ToolResult) -> None:
        """The parked call's result arrived: the sidecar runs the result controls and
        publishes it once (and sends its afterToolCall notification)."""
        res = self.stub.PublishDeferredResult(
            service_pb2.PublishDeferredResultRequest(tool_call_id=call.context.tool_call_id,
                                                     result=result),
            timeout=TIMEOUT_SECONDS,
        )
        emit(step="PublishDeferredResult", toolCallId=call.context.tool_call_id,
             published=res.published, content=res.final_result.content)


def main() -> None:
    with grpc.insecure_channel(ADDRESS) as channel:
        stub = service_pb2_grpc.HookServiceStub(channel)
        register_invalid_hook(stub)
        res = stub.RegisterHooks(
            service_pb2.RegisterHooksRequest(operation_id=OPERATION_ID, hooks=hooks()),
            timeout=TIMEOUT_SECONDS,
        )
        emit(step="RegisterHooks", operationId=OPERATION_ID, hookCount=res.hook_count)

        handlers = HandlerStream(stub, [OPERATION_ID])
        handlers.wait_attached()
        notifier = Notifier(stub)
        runtime = Runtime(stub, notifier)

        step = dict(agent_id=AGENT_ID, operation_id=OPERATION_ID, user_id=USER_ID, step_index=0,
                    step_type="call_tool")
        runtime.dispatch(events_pb2.HookEvent(before_step=events_pb2.BeforeStepEvent(**step)))

        read = ToolCall(tool_call("read", "fs", "readFile", {"path": "notes/todo.md"}, 0,
                                  events_pb2.EXECUTOR_CLIENT), deferred=True)
        delete = ToolCall(tool_call("delete", "fs", "deleteFile", {"path": "notes/todo.md"}, 1,
                                    events_pb2.EXECUTOR_SERVER))
        search = ToolCall(tool_call("search", "web", "search", {"query": "agenthooks sidecar"}, 2,
                                    events_pb2.EXECUTOR_SERVER))
        for call in (read, delete, search):
            runtime.decide(call)

        # The step's notifications reach the receivers before its afterStep.
        notifier.flush()
        runtime.dispatch(events_pb2.HookEvent(after_step=events_pb2.AfterStepEvent(
            **step, steps=1, tool_calls=3, total_tool_calls=3)))

        runtime.publish(read, events_pb2.ToolResult(content=READ_RESULT, success=True,
                                                     execution_time=12))
        notifier.close()

        done = stub.CompleteOperation(
            service_pb2.CompleteOperationRequest(event=events_pb2.OnCompleteEvent(
                agent_id=AGENT_ID, operation_id=OPERATION_ID, user_id=USER_ID, reason="done",
                status="done", total_steps=1, total_tool_calls=3)),
            timeout=TIMEOUT_SECONDS,
        )
        emit(step="CompleteOperation", reason="done", handlersDropped=done.handlers_dropped,
             outcomes=outcomes(done.outcomes))
        handlers.close()


if __name__ == "__main__":
    try:
        main()
    except grpc.RpcError as e:
        print(f"agenthooks call failed: {e.code().name}: {e.details()}", file=sys.stderr)
        sys.exit(1)
