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
4. publishes the parked call's result;
5. runs a small agent loop with a scripted model, shaped by modifying hooks
   (hookbus-hooks.md) that it registers on the operation: at transformContext a
   webhook redacts the card number in the user's message, at beforeToolCall a
   local handler clamps the search tool's `limit`, and at shouldStopAfterTurn a
   webhook (a turn budget) stops the loop after its second turn. Each iteration
   calls Modify at the three points and applies what it answers; a `blocked`
   answer applies nothing and ends the run with an error;
6. completes the operation.

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

# The agent loop's first message: the receiver's redactor removes the card number.
PROMPT = "Find the agenthooks docs. My card is 4111 1111 1111 1111 if a page asks for it."
# The largest `limit` the search tool takes; the clamp-limit handler enforces it.
SEARCH_LIMIT_MAX = 10
# The scripted model: its assistant turn at each iteration, with the search it calls
# (or None). It would search twice and then answer; the turn budget stops it first.
SCRIPT: list[tuple[str, dict[str, Any] | None]] = [
    ("Let me search for it.", {"query": "agenthooks sidecar", "limit": 50}),
    ("Let me look for the modifying hooks too.",
     {"query": "agenthooks modifying hooks", "limit": 5}),
    ("done: the docs are at https://example.com/agenthooks.", None),
]

_print_lock = threading.Lock()


def emit(**line: Any) -> None:
    """Prints one JSON line (the handler thread prints too)."""
    with _print_lock:
        print(json.dumps(line, separators=(",", ":")), flush=True)


def event_name(event: events_pb2.HookEvent) -> str:
    """The hook type literal of an event, such as `beforeStep`."""
    return event.DESCRIPTOR.fields_by_name[event.WhichOneof("event")].json_name


def point_name(point: int) -> str:
    """The spec's name of a modifying point, such as `beforeToolCall`."""
    words = hooks_pb2.ModifyPoint.Name(point).removeprefix("MODIFY_POINT_").lower().split("_")
    return words[0] + "".join(w.capitalize() for w in words[1:])


def to_json(value: Any) -> str:
    """Writes JSON as the other examples do: compact, non-ASCII as is."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


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


def modifying_hooks() -> list[hooks_pb2.Hook]:
    """The agent loop's modifying hooks, one per point, each in its plugin."""
    return [
        # A webhook: a card number must not reach the model, so if the redactor
        # fails the answer is `blocked` (onError: block) and the runtime stops.
        hooks_pb2.Hook(
            id="redact-card",
            point=hooks_pb2.MODIFY_POINT_TRANSFORM_CONTEXT,
            plugin="privacy",
            webhook=hooks_pb2.Webhook(url=f"{RECEIVER_URL}/redact",
                                      on_error=hooks_pb2.ON_ERROR_BLOCK),
        ),
        # A local handler, served over the Handle stream: the runtime knows its
        # tools' limits, and checks them with no HTTP round trip per tool call.
        hooks_pb2.Hook(id="clamp-limit", point=hooks_pb2.MODIFY_POINT_BEFORE_TOOL_CALL,
                       plugin="limits", matcher="^search$", handler=True),
        # A webhook, not a handler: the turn budget is the operator's policy, kept in
        # one service for runtimes in every language and changed without redeploying
        # them; as a handler the runtime would only ask itself. A budget that cannot
        # be checked stops the run (onError: block) rather than let it go on unmetered.
        hooks_pb2.Hook(
            id="turn-budget",
            point=hooks_pb2.MODIFY_POINT_SHOULD_STOP_AFTER_TURN,
            plugin="budget",
            webhook=hooks_pb2.Webhook(url=f"{RECEIVER_URL}/stop",
                                      on_error=hooks_pb2.ON_ERROR_BLOCK),
        ),
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
        """The handler: mocks web/search, runs the modifying handler, and is done with the rest."""
        if call.point != hooks_pb2.MODIFY_POINT_UNSPECIFIED:
            return self._modify(call)
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

    def _modify(self, call: service_pb2.HandlerCall) -> service_pb2.HandlerReply:
        """The modifying handler: clamps the search tool's `limit`, and changes nothing else.

        It gets the point's context as the hooks before it left it, and replies
        `modified` with its result, or `done` for no change.
        """
        point = point_name(call.point)
        if call.hook_id == "clamp-limit":
            args = json.loads(call.context_json)["args"]
            limit = args.get("limit")
            if type(limit) is int and limit > SEARCH_LIMIT_MAX:
                emit(step="Handle.call", hookId=call.hook_id, point=point, reply="modified")
                # The other arguments stay as the model wrote them.
                result = {"args": {**args, "limit": SEARCH_LIMIT_MAX}}
                return service_pb2.HandlerReply(
                    call_id=call.call_id,
                    modified=service_pb2.HandlerModified(result_json=to_json(result)),
                )
        emit(step="Handle.call", hookId=call.hook_id, point=point, reply="done")
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


class ModifyBlocked(Exception):
    """A hook with onError: block failed: the runtime applies nothing of the call."""


def search(args: dict[str, Any]) -> str:
    """The search tool: as many results as `limit` asks for."""
    return f"{args['limit']} results for {args['query']}"


class AgentLoop:
    """A small agent loop with a scripted model, shaped by the operation's modifying hooks.

    Each iteration calls Modify at transformContext and uses the messages it
    answers from then on, takes the scripted model's turn, calls Modify at
    beforeToolCall for the turn's tool call and runs the tool with the arguments
    it answers, then calls Modify at shouldStopAfterTurn and stops when told.
    The contexts are JSON objects named as hookbus-hooks.md names them.
    """

    def __init__(self, stub: service_pb2_grpc.HookServiceStub) -> None:
        self.stub = stub
        self._ids = 0
        self.messages: list[dict[str, Any]] = [self._message(role="user", content=PROMPT)]

    def _message(self, **fields: Any) -> dict[str, Any]:
        self._ids += 1
        return {"id": f"{OPERATION_ID}-loop-{self._ids}", **fields}

    def modify(self, point: int, context: dict[str, Any]) -> dict[str, Any]:
        """Runs the point's hooks and answers their composed result.

        A `blocked` answer raises ModifyBlocked: the caller applies nothing (fail closed).
        """
        res = self.stub.Modify(
            service_pb2.ModifyRequest(operation_id=OPERATION_ID, point=point,
                                      context_json=to_json(context)),
            timeout=TIMEOUT_SECONDS,
        )
        name, iteration = point_name(point), context["iteration"]
        outcome = res.WhichOneof("outcome")
        if outcome == "blocked":
            blocked = res.blocked
            emit(step="Modify.blocked", point=name, iteration=iteration, hookId=blocked.hook_id,
                 errorCode=blocked.error_code, message=blocked.message)
            raise ModifyBlocked(f"{name} blocked by {blocked.hook_id}: {blocked.message}")
        if outcome != "result_json":
            raise RuntimeError("Modify answered without a result")
        result = json.loads(res.result_json)
        details = {"stop": result.get("stop", False)} if name == "shouldStopAfterTurn" else {}
        emit(step="Modify", point=name, iteration=iteration, changed=sorted(result), **details,
             outcomes=outcomes(res.outcomes))
        return result

    def run(self) -> None:
        for iteration, (text, search_args) in enumerate(SCRIPT, start=1):
            transformed = self.modify(hooks_pb2.MODIFY_POINT_TRANSFORM_CONTEXT,
                                      {"messages": self.messages, "iteration": iteration})
            # The hooks' messages replace the runtime's: the card number is gone for good.
            self.messages = transformed.get("messages", self.messages)

            assistant = self._message(role="assistant", content=text)
            self.messages.append(assistant)
            if search_args is not None:
                call = {"id": f"{OPERATION_ID}-loop-call-{iteration}", "name": "search"}
                assistant["toolCalls"] = [{**call, "arguments": search_args}]
                self.messages.append(self.call_tool(call, search_args, iteration))

            stop = self.modify(hooks_pb2.MODIFY_POINT_SHOULD_STOP_AFTER_TURN,
                               {"messages": self.messages, "iteration": iteration,
                                "hadToolCalls": search_args is not None})
            if stop.get("stop") is True:
                emit(step="AgentLoop.stopped", iteration=iteration, by="shouldStopAfterTurn")
                return
            if search_args is None:
                emit(step="AgentLoop.stopped", iteration=iteration, by="noToolCalls")
                return
        raise RuntimeError("the scripted model has no more turns")

    def call_tool(self, call: dict[str, str], args: dict[str, Any],
                  iteration: int) -> dict[str, Any]:
        """Runs a tool call as the beforeToolCall hooks say, and answers its result message."""
        before = self.modify(hooks_pb2.MODIFY_POINT_BEFORE_TOOL_CALL,
                             {"toolCall": call, "args": args, "iteration": iteration})
        if "content" in before or before.get("isError") is True:
            # A hook answered in the tool's place: the tool must not run.
            content, is_error = before.get("content", ""), before.get("isError", False)
            emit(step="Tool.skipped", name=call["name"], content=content, isError=is_error)
        else:
            args = before.get("args", args)
            content, is_error = search(args), False
            emit(step="Tool", name=call["name"], limit=args["limit"], content=content)
        return self._message(role="toolResult", toolCallId=call["id"], toolName=call["name"],
                             content=content, isError=is_error)


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

        res = stub.RegisterHooks(
            service_pb2.RegisterHooksRequest(operation_id=OPERATION_ID, hooks=modifying_hooks()),
            timeout=TIMEOUT_SECONDS,
        )
        emit(step="RegisterHooks", operationId=OPERATION_ID, hookCount=res.hook_count)
        AgentLoop(stub).run()

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
    except ModifyBlocked as e:
        print(f"agenthooks blocked the agent loop: {e}", file=sys.stderr)
        sys.exit(1)
