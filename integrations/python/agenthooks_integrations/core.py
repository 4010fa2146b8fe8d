"""What both adapters share: the sidecar calls, one run's ids, and the tool-call flow.

The framework modules (`langchain`, `openai_agents`) only translate their
framework's hooks into the calls below; the mapping from framework ids to the
spec's fields lives in `RunState.tool_context` and in the adapters' docstrings,
and the README's "Framework adapters: field mapping" table repeats it.

Failure rule: a decision (`DecideToolCall`, `DecideToolResult`, `Modify`) that
cannot be made raises `AgentHooksError` and the tool does not run; the same
goes for notifications (`Dispatch`, `CompleteOperation`) unless the adapter was
built with `notifications_fail_open=True`, which logs and goes on.
"""

from __future__ import annotations

import json
import logging
import queue
import threading
import uuid
from collections.abc import Callable, Iterator
from concurrent import futures
from dataclasses import dataclass, field
from typing import Any

import grpc
from google.protobuf import json_format, struct_pb2

from agenthooks_client.v1 import events_pb2, hooks_pb2, service_pb2, service_pb2_grpc

log = logging.getLogger("agenthooks")

DEFAULT_TARGET = "127.0.0.1:50051"
DEFAULT_IDENTIFIER = "default"
# Every call has a deadline: a sidecar that does not answer is an error, never an allow.
DEFAULT_TIMEOUT_SECONDS = 10.0


class AgentHooksError(RuntimeError):
    """agenthooks could not decide or deliver: the tool did not run and the run fails."""


@dataclass(frozen=True)
class Settings:
    """What the user configures; the rest of the mapping comes from the framework.

    `operation_id`: the spec's `operationId`; when None each run gets a fresh
    UUID. `user_id`: `userId`, required (the step and terminal events must
    carry one; a run without it would fail at its first event, so the adapter
    refuses to be made without it). `agent_id`: `agentId`, omitted from tool
    events when None (the step and terminal events carry it as `""`, which
    the spec allows). `identifier`: the toolset's `identifier`; a tool's name
    is its `apiName`, so hook matchers test `identifier/name`.
    """

    target: str = DEFAULT_TARGET
    operation_id: str | None = None
    user_id: str | None = None
    agent_id: str | None = None
    identifier: str = DEFAULT_IDENTIFIER
    timeout: float = DEFAULT_TIMEOUT_SECONDS
    notifications_fail_open: bool = False

    def __post_init__(self) -> None:
        if not self.user_id:
            raise AgentHooksError(
                "agenthooks: user_id is required: the step and terminal events carry it as "
                "userId, which the sidecar refuses empty")


def _describe(e: grpc.RpcError) -> str:
    code = e.code().name if hasattr(e, "code") else "UNKNOWN"
    details = e.details() if hasattr(e, "details") else str(e)
    return f"{code}: {details}"


Handler = Callable[[service_pb2.HandlerCall], "service_pb2.HandlerReply | None"]
"""A local handler: gets each call of a hook registered with `handler: true` on a run's
operation, and answers a reply (`mock_reply`, `modified_reply`, any `HandlerReply`) or
None for done. An exception it raises is answered as a handler error. Calls run
concurrently, on up to `HANDLER_WORKERS` threads, each answered when it returns."""


def mock_reply(content: str, success: bool = True) -> service_pb2.HandlerReply:
    """A `beforeToolCall` handler's mock: the tool does not run and `content` is its result."""
    return service_pb2.HandlerReply(mock=service_pb2.HandlerMock(
        result=events_pb2.ToolResult(content=content, success=success)))


def modified_reply(result: dict[str, Any]) -> service_pb2.HandlerReply:
    """A modifying handler's result (hookbus-hooks.md), such as `{"args": {...}}`."""
    return service_pb2.HandlerReply(modified=service_pb2.HandlerModified(
        result_json=json.dumps(result, separators=(",", ":"), ensure_ascii=False)))


# How many calls of a local handler run at once; further calls wait for a free worker.
HANDLER_WORKERS = 16


class HandleStream:
    """Serves a local handler over the sidecar's Handle stream, on its own thread.

    The sidecar waits for a handler's reply inside DecideToolCall, Dispatch and
    Modify, so the stream is read apart from the thread that makes those calls.
    Each call runs on a worker thread (at most `HANDLER_WORKERS` at once) and is
    answered when it completes, so that a slow call does not hold back the
    calls of concurrent tool calls past the sidecar's `--handler-timeout`.
    """

    def __init__(self, stub: service_pb2_grpc.HookServiceStub, handler: Handler,
                 timeout: float) -> None:
        self._handler = handler
        self._timeout = timeout
        self._workers = futures.ThreadPoolExecutor(max_workers=HANDLER_WORKERS,
                                                   thread_name_prefix="agenthooks-handler")
        self._outbox: queue.Queue[service_pb2.HandleRequest | None] = queue.Queue()
        self._changed = threading.Condition()
        self._attached: set[str] = set()
        self.error: BaseException | None = None
        self._responses = stub.Handle(self._requests())
        self._thread = threading.Thread(target=self._serve, name="agenthooks-handle", daemon=True)
        self._thread.start()

    def _requests(self) -> Iterator[service_pb2.HandleRequest]:
        while (request := self._outbox.get()) is not None:
            yield request

    def _serve(self) -> None:
        try:
            for message in self._responses:
                kind = message.WhichOneof("message")
                if kind == "attached":
                    with self._changed:
                        self._attached.update(message.attached.operation_ids)
                        self._changed.notify_all()
                elif kind == "replaced":
                    with self._changed:
                        self._attached.difference_update(message.replaced.operation_ids)
                elif kind == "call":
                    self._workers.submit(self._answer, message.call)
        except grpc.RpcError as e:
            self.error = e
        finally:
            with self._changed:
                self.error = self.error or AgentHooksError("agenthooks Handle stream ended")
                self._changed.notify_all()

    def _answer(self, call: service_pb2.HandlerCall) -> None:
        self._outbox.put(service_pb2.HandleRequest(reply=self._reply(call)))

    def _reply(self, call: service_pb2.HandlerCall) -> service_pb2.HandlerReply:
        try:
            reply = self._handler(call)
        except Exception as e:
            log.warning("agenthooks local handler %s raised", call.hook_id, exc_info=True)
            return service_pb2.HandlerReply(call_id=call.call_id,
                                            error=service_pb2.HandlerError(message=str(e)))
        if reply is None:
            return service_pb2.HandlerReply(call_id=call.call_id, done=service_pb2.HandlerDone())
        out = service_pb2.HandlerReply()
        out.CopyFrom(reply)
        out.call_id = call.call_id
        return out

    def check(self) -> None:
        """Raises when the stream broke: the operation's handlers would be skipped."""
        if self.error is not None:
            raise AgentHooksError(f"agenthooks Handle stream failed: {self.error}")

    def attach(self, operation_id: str) -> None:
        """Attaches the operation and waits until the sidecar confirmed it."""
        self._outbox.put(service_pb2.HandleRequest(
            attach=service_pb2.HandleAttach(operation_ids=[operation_id])))
        with self._changed:
            done = self._changed.wait_for(
                lambda: operation_id in self._attached or self.error is not None, self._timeout)
        self.check()
        if not done:
            raise AgentHooksError(f"agenthooks did not confirm the Handle attachment of {operation_id}")

    def detach(self, operation_id: str) -> None:
        with self._changed:
            self._attached.discard(operation_id)
        if self.error is None:
            self._outbox.put(service_pb2.HandleRequest(
                detach=service_pb2.HandleDetach(operation_ids=[operation_id])))

    def close(self) -> None:
        self._outbox.put(None)
        self._thread.join(self._timeout)
        # A call still running answers nobody: the stream is closed.
        self._workers.shutdown(wait=False, cancel_futures=True)



class SidecarClient:
    """The sidecar's RPCs as the adapters use them, over one gRPC channel."""

    def __init__(self, settings: Settings, channel: grpc.Channel | None = None,
                 handler: Handler | None = None) -> None:
        self.settings = settings
        self._channel = channel if channel is not None else grpc.insecure_channel(settings.target)
        self._stub = service_pb2_grpc.HookServiceStub(self._channel)
        self._handler = handler
        self._handle: HandleStream | None = None
        self._handle_lock = threading.Lock()

    def close(self) -> None:
        if self._handle is not None:
            self._handle.close()
        self._channel.close()

    def attach(self, operation_id: str) -> None:
        """Serves the local handler for the operation (nothing without a handler)."""
        if self._handler is None:
            return
        with self._handle_lock:
            if self._handle is None or self._handle.error is not None:
                self._handle = HandleStream(self._stub, self._handler, self.settings.timeout)
            handle = self._handle
        handle.attach(operation_id)

    def detach(self, operation_id: str) -> None:
        if self._handle is not None:
            self._handle.detach(operation_id)

    def check_handlers(self) -> None:
        """Raises when the local handler's stream broke (its hooks would be skipped)."""
        if self._handle is not None:
            self._handle.check()

    def check_outcomes(self, outcomes: Any) -> None:
        """Raises when an answer shows the local handler lost mid-call (`handler_detached`).

        Read from the answer itself, so it does not depend on when the stream's thread
        sees the end: the answer was made without the handler.
        """
        if self._handle is None:
            return
        for outcome in outcomes:
            if outcome.error_code == "handler_detached":
                raise AgentHooksError(
                    f"agenthooks Handle stream failed: hook {outcome.hook_id} lost its handler")

    def _call(self, name: str, request: Any) -> Any:
        try:
            return getattr(self._stub, name)(request, timeout=self.settings.timeout)
        except grpc.RpcError as e:
            raise AgentHooksError(
                f"agenthooks {name} failed at {self.settings.target}: {_describe(e)}") from e

    def notify(self, name: str, request: Any) -> None:
        """A notification (Dispatch, CompleteOperation): fails closed unless configured open."""
        try:
            self._call(name, request)
        except AgentHooksError:
            if not self.settings.notifications_fail_open:
                raise
            log.warning("agenthooks notification %s not delivered (fail-open)", name, exc_info=True)

    def dispatch(self, event: events_pb2.HookEvent) -> None:
        try:
            # An event's handlers would be skipped too: a failed event, as the others fail.
            self.check_handlers()
        except AgentHooksError:
            if not self.settings.notifications_fail_open:
                raise
            log.warning("agenthooks event not handled (fail-open)", exc_info=True)
        self.notify("Dispatch", service_pb2.DispatchRequest(event=event))

    def decide_tool_call(self, context: events_pb2.ToolCallContext) -> Any:
        res = self._call("DecideToolCall", service_pb2.DecideToolCallRequest(
            event=events_pb2.BeforeToolCallEvent(context=context)))
        # Only the outcomes the contract gives here; anything else is never an allow.
        if res.decision.WhichOneof("outcome") not in ("allow", "deny", "mock"):
            raise AgentHooksError("agenthooks DecideToolCall answered without a decision")
        self.check_outcomes(res.outcomes)
        return res.decision

    def decide_tool_result(self, context: events_pb2.ToolCallContext,
                           result: events_pb2.ToolResult, mocked: bool) -> Any:
        res = self._call("DecideToolResult", service_pb2.DecideToolResultRequest(
            event=events_pb2.AfterToolCallEvent(context=context, mocked=mocked, result=result)))
        # A result is allowed or denied: a mock (or nothing) here is never an allow.
        if res.decision.WhichOneof("outcome") not in ("allow", "deny"):
            raise AgentHooksError("agenthooks DecideToolResult answered without a decision")
        self.check_outcomes(res.outcomes)
        return res.decision

    def modify(self, operation_id: str, point: int, context: dict[str, Any]) -> dict[str, Any]:
        """Runs a modifying point and answers the composed result (`{}`: no change)."""
        res = self._call("Modify", service_pb2.ModifyRequest(
            operation_id=operation_id, point=point,
            context_json=json.dumps(context, separators=(",", ":"), ensure_ascii=False,
                                    default=str)))
        self.check_outcomes(res.outcomes)
        outcome = res.WhichOneof("outcome")
        if outcome == "blocked":
            b = res.blocked
            name = hooks_pb2.ModifyPoint.Name(point)
            raise AgentHooksError(
                f"agenthooks Modify {name} blocked by hook {b.hook_id}: {b.error_code} {b.message}")
        if outcome != "result_json":
            raise AgentHooksError("agenthooks Modify answered without a result")
        result = json.loads(res.result_json)
        if not isinstance(result, dict):
            raise AgentHooksError("agenthooks Modify answered a result that is not an object")
        return result

    def complete(self, event: events_pb2.OnCompleteEvent) -> None:
        self.notify("CompleteOperation", service_pb2.CompleteOperationRequest(event=event))


def struct(value: dict[str, Any]) -> struct_pb2.Struct:
    s = struct_pb2.Struct()
    s.update(value)
    return s


def result_dict(result: events_pb2.ToolResult) -> dict[str, Any]:
    return json_format.MessageToDict(result)


@dataclass
class ToolOutcome:
    """What the model sees in place of a tool call, and whether the tool function ran."""

    content: str
    success: bool
    ran: bool
    # Which path decided: allow (the tool ran), deny, mock, or modify (a beforeToolCall
    # modifying hook answered in the tool's place).
    decision: str


@dataclass
class PlannedCall:
    """A tool call after `beforeToolCall` (Modify) and `DecideToolCall`, before it runs."""

    context: events_pb2.ToolCallContext
    # What the tool gets: the model's arguments, or a beforeToolCall hook's rewrite.
    args: dict[str, Any]
    # Whether a beforeToolCall hook rewrote the arguments.
    rewritten: bool = False
    # Set when the tool must not run: the result stands in for it.
    result: events_pb2.ToolResult | None = None
    mocked: bool = False
    decision: str = "allow"


@dataclass
class RunState:
    """One run (one operation) of an agent: its ids and counters.

    `step_index` is the 0-based index of the model call within the run; it is
    -1 before the first one.
    """

    client: SidecarClient
    operation_id: str = field(default_factory=lambda: str(uuid.uuid4()))
    step_index: int = -1
    total_tool_calls: int = 0
    last_assistant_content: str = ""
    completed: bool = False
    # The step whose `afterStep` waits for its tools: (content, tool calls).
    _pending_step: tuple[str, int] | None = None

    @property
    def settings(self) -> Settings:
        return self.client.settings

    def start(self) -> RunState:
        """Starts the run: attaches the local handler, if any, for its operation."""
        self.client.attach(self.operation_id)
        return self

    # ---- the step and terminal events -------------------------------------------------

    def _step_fields(self) -> dict[str, Any]:
        return dict(agent_id=self.settings.agent_id or "", user_id=self.settings.user_id or "",
                    operation_id=self.operation_id)

    def before_step(self) -> None:
        """Starts the next model call: the last step's `afterStep` if pending, then `beforeStep`."""
        self.flush_step()
        self.step_index += 1
        self.client.dispatch(events_pb2.HookEvent(before_step=events_pb2.BeforeStepEvent(
            **self._step_fields(), step_index=self.step_index, steps=self.step_index)))

    def after_model(self, content: str, tool_calls: int) -> None:
        """The model answered. A step is the model call and the tools it asked for, so
        `afterStep` goes out now when it asked for none, else once they ran (at the
        next model call or at completion)."""
        self.total_tool_calls += tool_calls
        self.last_assistant_content = content
        self._pending_step = (content, tool_calls)
        if tool_calls == 0:
            self.flush_step()

    def flush_step(self) -> None:
        """Dispatches the pending `afterStep` (awaited), if any."""
        if self._pending_step is None:
            return
        content, tool_calls = self._pending_step
        self._pending_step = None
        # The step's text only when it has some, as the other adapters send it.
        text = {"content": content} if content else {}
        self.client.dispatch(events_pb2.HookEvent(after_step=events_pb2.AfterStepEvent(
            **self._step_fields(), step_index=self.step_index, steps=self.step_index + 1,
            tool_calls=tool_calls, total_tool_calls=self.total_tool_calls, **text)))

    def complete(self, error: BaseException | None = None) -> None:
        """Ends the operation once: `onComplete` (reason `done`), or `onError` too on `error`."""
        if self.completed:
            return
        self.completed = True
        try:
            self._complete(error)
        finally:
            self.client.detach(self.operation_id)

    def _complete(self, error: BaseException | None) -> None:
        fields = dict(**self._step_fields(), steps=self.step_index + 1,
                      tool_calls=self.total_tool_calls,
                      last_assistant_content=self.last_assistant_content)
        if error is None:
            self.flush_step()
            event = events_pb2.OnCompleteEvent(**fields, reason="done", status="done",
                                               error_message="")
            self.client.complete(event)
            return
        event = events_pb2.OnCompleteEvent(**fields, reason="error", status="error",
                                           error_message=str(error),
                                           error_type=type(error).__name__)
        try:
            self.client.complete(event)
        except AgentHooksError:
            # The run already fails with `error`; the sidecar's own failure is logged.
            log.warning("agenthooks could not complete operation %s", self.operation_id,
                        exc_info=True)

    # ---- the model-side modifying points ------------------------------------------------

    def modify(self, point: int, context: dict[str, Any]) -> dict[str, Any]:
        # A modifying handler on a broken stream would be skipped: no change is not an answer.
        self.client.check_handlers()
        result = self.client.modify(self.operation_id, point, context)
        self.client.check_handlers()
        return result

    @property
    def iteration(self) -> int:
        """The spec's `iteration` of the current turn: 1-based (`stepIndex + 1`)."""
        return self.step_index + 1

    # ---- the tool-call flow -------------------------------------------------------------

    def tool_context(self, *, tool_call_id: str, api_name: str, args: dict[str, Any],
                     assistant_message_id: str | None, call_index: int,
                     step_index: int | None = None) -> events_pb2.ToolCallContext:
        """The spec's ToolCallContext of one tool call (the mapping, in one place)."""
        if not tool_call_id:
            raise AgentHooksError(
                f"agenthooks needs the model's tool call id for {api_name}; it has none")
        step = self.step_index if step_index is None else step_index
        optional: dict[str, Any] = {}
        if self.settings.agent_id is not None:
            optional["agent_id"] = self.settings.agent_id
        if self.settings.user_id is not None:
            optional["user_id"] = self.settings.user_id
        return events_pb2.ToolCallContext(
            tool_call_id=tool_call_id,
            assistant_message_id=assistant_message_id or f"{self.operation_id}:assistant:{step}",
            identifier=self.settings.identifier,
            api_name=api_name,
            args=struct(args),
            call_index=call_index,
            step_index=step,
            operation_id=self.operation_id,
            executor=events_pb2.EXECUTOR_SERVER,
            **optional,
        )

    def plan_tool_call(self, context: events_pb2.ToolCallContext,
                       args: dict[str, Any] | None = None) -> PlannedCall:
        """Runs `beforeToolCall` (Modify: argument rewrite or short-circuit), then DecideToolCall.

        `args` is the model's input as the framework parsed it; the tool gets it
        as it is unless a hook rewrote the arguments (`context.args`, a Struct,
        holds every number as a double: an int would come back a float, and one
        above 2**53 changed). Without it, the arguments are read from the context.
        The controls see the effective arguments, the ones the tool would get.
        """
        self.client.check_handlers()
        if args is None:
            args = json_format.MessageToDict(context.args)
        before = self.modify(hooks_pb2.MODIFY_POINT_BEFORE_TOOL_CALL, {
            "toolCall": {"id": context.tool_call_id, "name": context.api_name},
            "args": args,
            "iteration": context.step_index + 1,
        })
        rewritten = isinstance(before.get("args"), dict)
        if rewritten:
            args = before["args"]
            context.args.Clear()
            context.args.update(args)
        decision = self.client.decide_tool_call(context)
        # A stream that broke while the sidecar decided may have had its handlers skipped.
        self.client.check_handlers()
        outcome = decision.WhichOneof("outcome")
        planned = PlannedCall(context=context, args=args, rewritten=rewritten)
        if outcome == "deny":
            planned.result = decision.deny.blocked_result
            planned.decision = "deny"
        elif outcome == "mock":
            planned.result = decision.mock.result
            planned.mocked = True
            planned.decision = "mock"
        elif "content" in before or before.get("isError") is True:
            # A modifying hook answered in the tool's place (hookbus-hooks.md).
            is_error = before.get("isError") is True
            planned.result = events_pb2.ToolResult(content=str(before.get("content", "")),
                                                   success=not is_error)
            planned.mocked = True
            planned.decision = "modify"
        return planned

    def tool_failed(self, planned: PlannedCall, error: BaseException) -> None:
        """The tool function raised: dispatches `onToolCallError` (the run fails after it)."""
        self.client.dispatch(events_pb2.HookEvent(on_tool_call_error=events_pb2.OnToolCallErrorEvent(
            context=planned.context, error=str(error))))

    def finish_tool_call(self, planned: PlannedCall, ran_result: events_pb2.ToolResult | None
                         ) -> ToolOutcome:
        """DecideToolResult on a result that ran or was mocked, then the `afterToolCall` event."""
        ran = ran_result is not None
        result = ran_result if ran_result is not None else planned.result
        assert result is not None
        if planned.decision != "deny":
            decision = self.client.decide_tool_result(planned.context, result, planned.mocked)
            if decision.WhichOneof("outcome") == "deny":
                result = decision.deny.blocked_result
        self.client.dispatch(events_pb2.HookEvent(after_tool_call=events_pb2.AfterToolCallEvent(
            context=planned.context, mocked=planned.mocked, result=result)))
        return ToolOutcome(content=result.content, success=result.success, ran=ran,
                           decision=planned.decision)

    def run_tool_call(self, context: events_pb2.ToolCallContext,
                      call: Callable[[dict[str, Any]], str],
                      args: dict[str, Any] | None = None) -> ToolOutcome:
        """The whole flow, for a synchronous tool: plan, run if allowed, check, notify.

        `args`: the model's arguments, as for `plan_tool_call`."""
        planned = self.plan_tool_call(context, args)
        if planned.result is not None:
            return self.finish_tool_call(planned, None)
        try:
            content = call(planned.args)
        except Exception as e:
            self.tool_failed(planned, e)
            raise
        return self.finish_tool_call(planned, events_pb2.ToolResult(content=content, success=True))


def text_of(content: Any, parts_as_json: bool = False) -> str:
    """Plain text of a framework message's content: a string, or the text of its parts.

    With `parts_as_json`, a part that is not text (a `json` or `image` block, any
    other object) is written as JSON in its place instead of left out: a tool's
    result is judged by what it holds, all of it.
    """
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for part in content:
            if isinstance(part, str):
                parts.append(part)
            elif isinstance(part, dict) and isinstance(part.get("text"), str):
                parts.append(part["text"])
            elif parts_as_json:
                parts.append(json.dumps(part, default=str, ensure_ascii=False))
        return "".join(parts)
    if content is None:
        return ""
    if parts_as_json and isinstance(content, dict):
        return json.dumps(content, default=str, ensure_ascii=False)
    return str(content)
