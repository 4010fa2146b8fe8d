"""agenthooks for LangChain v1 agents: one `AgentMiddleware` for `create_agent`.

    from langchain.agents import create_agent
    from agenthooks_integrations.langchain import AgentHooksMiddleware

    middleware = AgentHooksMiddleware(user_id="user-1", identifier="weather")
    agent = create_agent(model, tools, middleware=[middleware])

What each of the middleware's hooks does (the spec's names):

- `before_agent`: starts the run (operation): `operationId` is the
  constructor's `operation_id`, else the run config's
  `configurable["agenthooks_operation_id"]`, else a fresh UUID.
- `before_model`: from the second model call on, the last step's `afterStep`
  (Dispatch, awaited) and `shouldStopAfterTurn` (Modify; `stop: true` ends the
  agent); then `beforeStep` (Dispatch, awaited).
- `wrap_model_call`: refuses a model call whose tools hold a provider (built-in)
  tool, a dict such as `{"type": "web_search_preview"}` (its calls run at the
  provider and never reach `wrap_tool_call`, so nothing could decide them);
  then `transformContext` (Modify) on the messages the model gets,
  for this call only; then `beforeProviderPayload` (Modify) with
  `{"model": <model type>, "payload": <the request's model_settings>}`, the
  keyword arguments bound to the chat model with its tools (the part of the
  provider request a middleware can change).
- `after_model`: `afterStep` (Dispatch, awaited) when the model asked for no
  tool; else the step ends once its tools ran, and its `afterStep` goes out
  at the next `before_model` (or at completion).
- `wrap_tool_call`: `beforeToolCall` (Modify: argument rewrite or answer in
  the tool's place), `DecideToolCall` (allow runs the tool, deny's blocked
  result becomes the ToolMessage, mock's result stands in), the tool,
  `DecideToolResult`, then `afterToolCall` (Dispatch); `onToolCallError` when
  the tool raises.
- `after_agent`: `CompleteOperation` (`onComplete`, reason `done`). A run that
  fails in one of these hooks (the model, a tool, or agenthooks) completes with
  reason `error` (`onComplete`, then `onError`) before the error propagates.

Ids (see also the README's mapping table): `toolCallId` is the AIMessage tool
call's `id`; `assistantMessageId` the AIMessage's `id` (else
`<operationId>:assistant:<stepIndex>`); `callIndex` the tool call's position in
`AIMessage.tool_calls`; `stepIndex` counts model calls from 0.

Messages sent to the modifying points use the shape of hookbus-hooks.md's
messages: `{"role":"user","content":...}`,
`{"role":"assistant","content":...,"toolCalls":[{"id","name","arguments"}]}`,
`{"role":"toolResult","toolCallId","toolName","content","isError"}`,
`{"role":"system","content":...}`, each with the LangChain message's `id` when
it has one; content is the message's text. Answered messages are turned back
into LangChain messages only when a hook changed them.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Awaitable, Callable
from typing import Annotated, Any

from langchain.agents.middleware import AgentMiddleware, AgentState, ModelRequest
from langchain.agents.middleware.types import PrivateStateAttr, hook_config
from langchain_core.messages import (
    AIMessage,
    AnyMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)
from langchain_core.tools import BaseTool
from langgraph.config import get_config
from langgraph.errors import GraphInterrupt
from langgraph.types import Command
from typing_extensions import NotRequired

from agenthooks_client.v1 import events_pb2, hooks_pb2
from agenthooks_integrations.core import (
    AgentHooksError,
    Handler,
    RunState,
    Settings,
    SidecarClient,
    text_of,
)

__all__ = ["AgentHooksMiddleware", "AgentHooksError", "to_spec_messages", "from_spec_messages"]

OPERATION_ID_KEY = "agenthooks_operation_id"


class AgentHooksState(AgentState):
    """The agent state plus the run's operation id (private to this middleware)."""

    agenthooks_operation_id: NotRequired[Annotated[str, PrivateStateAttr]]


def to_spec_messages(messages: list[BaseMessage]) -> list[dict[str, Any]]:
    """LangChain messages as hookbus-hooks.md messages (see the module doc)."""
    out = []
    for m in messages:
        if isinstance(m, AIMessage):
            d: dict[str, Any] = {"role": "assistant", "content": text_of(m.content)}
            if m.tool_calls:
                d["toolCalls"] = [{"id": c["id"], "name": c["name"], "arguments": c["args"]}
                                  for c in m.tool_calls]
        elif isinstance(m, ToolMessage):
            d = {"role": "toolResult", "toolCallId": m.tool_call_id, "toolName": m.name or "",
                 "content": text_of(m.content), "isError": m.status == "error"}
        elif isinstance(m, HumanMessage):
            d = {"role": "user", "content": text_of(m.content)}
        elif isinstance(m, SystemMessage):
            d = {"role": "system", "content": text_of(m.content)}
        else:
            d = {"role": m.type, "content": text_of(m.content)}
        if m.id:
            d["id"] = m.id
        out.append(d)
    return out


def from_spec_messages(messages: list[Any]) -> list[AnyMessage]:
    """hookbus-hooks.md messages back to LangChain messages; an unknown role is an error."""
    out: list[AnyMessage] = []
    for d in messages:
        if not isinstance(d, dict):
            raise AgentHooksError("agenthooks transformContext answered a message that is not an object")
        role, content, mid = d.get("role"), str(d.get("content", "")), d.get("id")
        if role == "user":
            out.append(HumanMessage(content=content, id=mid))
        elif role == "assistant":
            calls = [{"id": c.get("id"), "name": c.get("name"), "args": c.get("arguments") or {},
                      "type": "tool_call"} for c in d.get("toolCalls") or []]
            out.append(AIMessage(content=content, tool_calls=calls, id=mid))
        elif role == "toolResult":
            out.append(ToolMessage(content=content, tool_call_id=str(d.get("toolCallId", "")),
                                   name=d.get("toolName"), id=mid,
                                   status="error" if d.get("isError") else "success"))
        elif role == "system":
            out.append(SystemMessage(content=content, id=mid))
        else:
            raise AgentHooksError(f"agenthooks transformContext answered a message of role {role!r}")
    return out


def _tool_call_position(messages: list[Any], tool_call_id: str) -> tuple[str | None, int]:
    """The id of the AIMessage that asked for a tool call, and the call's index in it."""
    for m in reversed(messages):
        if isinstance(m, AIMessage):
            for i, c in enumerate(m.tool_calls):
                if c.get("id") == tool_call_id:
                    return m.id, i
    raise AgentHooksError(f"agenthooks found no AIMessage with tool call {tool_call_id}")


def _update_text(update: Any) -> str:
    """A `Command`'s state update as JSON, each message as its type and content."""
    def plain(value: Any) -> Any:
        if isinstance(value, BaseMessage):
            return {"type": value.type, "content": text_of(value.content, parts_as_json=True)}
        if isinstance(value, (list, tuple)):
            return [plain(v) for v in value]
        if isinstance(value, dict):
            return {str(k): plain(v) for k, v in value.items()}
        return value

    return json.dumps(plain(update), default=str, ensure_ascii=False)


class AgentHooksMiddleware(AgentMiddleware):
    """Connects a `create_agent` agent to the agenthooks sidecar (see the module doc).

    Args:
        target: the sidecar's gRPC address (`host:port` or `unix:/path`).
        operation_id: the spec's `operationId` for every run of this middleware;
            None: the run config's `configurable["agenthooks_operation_id"]`, else a UUID per run.
        user_id, agent_id: `userId`, `agentId` (omitted from tool events when None).
        identifier: the toolset's `identifier`, default `"default"`; `apiName` is the tool's name.
        timeout: seconds per sidecar call.
        notifications_fail_open: events that cannot be delivered are logged and the run
            goes on; decisions always fail closed.
        channel: a gRPC channel to use instead of one to `target`.
        handler: a local handler (`core.Handler`), served over a Handle stream
            attached for each run's operation (hooks registered with `handler: true`).
    """

    state_schema = AgentHooksState

    def __init__(self, *, target: str = Settings.target, operation_id: str | None = None,
                 user_id: str | None = None, agent_id: str | None = None,
                 identifier: str = Settings.identifier, timeout: float = Settings.timeout,
                 notifications_fail_open: bool = False, channel: Any = None,
                 handler: Handler | None = None) -> None:
        super().__init__()
        self.settings = Settings(target=target, operation_id=operation_id, user_id=user_id,
                                 agent_id=agent_id, identifier=identifier, timeout=timeout,
                                 notifications_fail_open=notifications_fail_open)
        self.client = SidecarClient(self.settings, channel, handler)
        self._runs: dict[str, RunState] = {}
        self._lock = threading.Lock()

    # ---- runs ----------------------------------------------------------------------------

    def _operation_id(self) -> str | None:
        if self.settings.operation_id is not None:
            return self.settings.operation_id
        try:
            configurable = get_config().get("configurable") or {}
        except RuntimeError:
            return None
        value = configurable.get(OPERATION_ID_KEY)
        return str(value) if value else None

    def _start(self) -> dict[str, Any]:
        op = self._operation_id()
        run = RunState(self.client) if op is None else RunState(self.client, operation_id=op)
        run.start()
        with self._lock:
            self._runs[run.operation_id] = run
        return {OPERATION_ID_KEY: run.operation_id}

    def _run(self, state: Any) -> RunState:
        op = state.get(OPERATION_ID_KEY) if isinstance(state, dict) else None
        with self._lock:
            run = self._runs.get(op) if op else None
        if run is None:
            raise AgentHooksError("agenthooks has no run for this agent state (before_agent did not run)")
        return run

    def _fail(self, run: RunState, error: BaseException) -> None:
        run.complete(error)
        with self._lock:
            self._runs.pop(run.operation_id, None)

    def _guarded(self, state: Any, fn: Callable[[RunState], Any]) -> Any:
        run = self._run(state)
        try:
            return fn(run)
        except Exception as e:
            self._fail(run, e)
            raise

    # ---- the agent's hooks ---------------------------------------------------------------

    def before_agent(self, state: Any, runtime: Any) -> dict[str, Any] | None:
        return self._start()

    async def abefore_agent(self, state: Any, runtime: Any) -> dict[str, Any] | None:
        return self._start()

    def _before_model(self, run: RunState, state: Any) -> dict[str, Any] | None:
        run.flush_step()
        if run.step_index >= 0:
            stop = run.modify(hooks_pb2.MODIFY_POINT_SHOULD_STOP_AFTER_TURN, {
                "messages": to_spec_messages(state["messages"]),
                "iteration": run.iteration,
                "hadToolCalls": True,
            })
            if stop.get("stop") is True:
                return {"jump_to": "end"}
        run.before_step()
        return None

    @hook_config(can_jump_to=["end"])
    def before_model(self, state: Any, runtime: Any) -> dict[str, Any] | None:
        return self._guarded(state, lambda run: self._before_model(run, state))

    @hook_config(can_jump_to=["end"])
    async def abefore_model(self, state: Any, runtime: Any) -> dict[str, Any] | None:
        return await asyncio.to_thread(self.before_model, state, runtime)

    def _after_model(self, run: RunState, state: Any) -> None:
        last = state["messages"][-1]
        calls = len(last.tool_calls) if isinstance(last, AIMessage) else 0
        run.after_model(text_of(last.content), calls)

    def after_model(self, state: Any, runtime: Any) -> dict[str, Any] | None:
        return self._guarded(state, lambda run: self._after_model(run, state))

    async def aafter_model(self, state: Any, runtime: Any) -> dict[str, Any] | None:
        return await asyncio.to_thread(self.after_model, state, runtime)

    def _after_agent(self, state: Any) -> None:
        run = self._run(state)
        with self._lock:
            self._runs.pop(run.operation_id, None)
        run.complete()

    def after_agent(self, state: Any, runtime: Any) -> dict[str, Any] | None:
        self._after_agent(state)
        return None

    async def aafter_agent(self, state: Any, runtime: Any) -> dict[str, Any] | None:
        await asyncio.to_thread(self._after_agent, state)
        return None

    # ---- the model call ------------------------------------------------------------------

    @staticmethod
    def _refuse_provider_tools(request: ModelRequest) -> None:
        """A provider (built-in) tool, such as `{"type": "web_search_preview"}`, runs at the
        provider and never reaches `wrap_tool_call`: its calls would go undecided, so the
        model call is refused before it runs (as the Agents SDK adapter refuses hosted tools)."""
        for tool in request.tools or []:
            if not isinstance(tool, BaseTool):
                raise AgentHooksError(
                    f"agenthooks: tool {tool!r} is a provider tool, whose calls agenthooks "
                    "cannot decide (they never reach wrap_tool_call); remove it from the agent")

    def _shape_request(self, run: RunState, request: ModelRequest) -> ModelRequest:
        self._refuse_provider_tools(request)
        context = run.modify(hooks_pb2.MODIFY_POINT_TRANSFORM_CONTEXT, {
            "messages": to_spec_messages(request.messages), "iteration": run.iteration})
        if isinstance(context.get("messages"), list):
            request = request.override(messages=from_spec_messages(context["messages"]))
        payload = run.modify(hooks_pb2.MODIFY_POINT_BEFORE_PROVIDER_PAYLOAD, {
            "model": getattr(request.model, "_llm_type", type(request.model).__name__),
            "payload": dict(request.model_settings)})
        if isinstance(payload.get("payload"), dict):
            request = request.override(model_settings=payload["payload"])
        return request

    def wrap_model_call(self, request: ModelRequest, handler: Callable[[ModelRequest], Any]) -> Any:
        run = self._run(request.state)
        try:
            return handler(self._shape_request(run, request))
        except Exception as e:
            self._fail(run, e)
            raise

    async def awrap_model_call(self, request: ModelRequest,
                               handler: Callable[[ModelRequest], Awaitable[Any]]) -> Any:
        run = self._run(request.state)
        try:
            shaped = await asyncio.to_thread(self._shape_request, run, request)
            return await handler(shaped)
        except Exception as e:
            await asyncio.to_thread(self._fail, run, e)
            raise

    # ---- the tool call -------------------------------------------------------------------

    def _plan(self, run: RunState, request: Any) -> Any:
        """Plans the call; the tool gets the model's own arguments unless a hook rewrote them."""
        call = request.tool_call
        message_id, index = _tool_call_position(request.state.get("messages", []), call["id"])
        args = dict(call.get("args") or {})
        context = run.tool_context(tool_call_id=call["id"], api_name=call["name"], args=args,
                                   assistant_message_id=message_id, call_index=index)
        return run.plan_tool_call(context, args)

    @staticmethod
    def _request_of(request: Any, planned: Any) -> Any:
        """The tool's request: as the model made it, or with the rewritten arguments."""
        if not planned.rewritten:
            return request
        return request.override(tool_call={**request.tool_call, "args": planned.args})

    @staticmethod
    def _message(request: Any, content: str, success: bool) -> ToolMessage:
        call = request.tool_call
        return ToolMessage(content=content, tool_call_id=call["id"], name=call["name"],
                           status="success" if success else "error")

    @staticmethod
    def _as_result(request: Any, output: Any) -> events_pb2.ToolResult:
        """The result the controls judge: everything the model or the graph would get.

        A tool's `ToolMessage` gives its content (parts that are not text as JSON). A
        `Command` gives the content of its `ToolMessage` for this call, or, without
        one, its state update as JSON: what it carries reaches the graph whether or
        not it is text, so the controls judge it too (and a denial drops it whole).
        """
        if isinstance(output, ToolMessage):
            return events_pb2.ToolResult(content=text_of(output.content, parts_as_json=True),
                                         success=output.status != "error")
        if isinstance(output, Command):
            update = output.update
            messages = update.get("messages") if isinstance(update, dict) else None
            only = messages[0] if isinstance(messages, list) and len(messages) == 1 else None
            if isinstance(update, dict) and len(update) == 1 and isinstance(only, ToolMessage) \
                    and only.tool_call_id == request.tool_call["id"]:
                # The call's own answer, and nothing else: judged as a ToolMessage is.
                return events_pb2.ToolResult(content=text_of(only.content, parts_as_json=True),
                                             success=only.status != "error")
            # More than the call's answer reaches the graph: all of it is judged.
            return events_pb2.ToolResult(content=_update_text(update), success=True)
        return events_pb2.ToolResult(content=text_of(output, parts_as_json=True), success=True)

    def _finish(self, run: RunState, request: Any, planned: Any, output: Any) -> Any:
        """Checks a tool's output (DecideToolResult), notifies, and answers what the model sees."""
        result = None if output is None else self._as_result(request, output)
        outcome = run.finish_tool_call(planned, result)
        if output is not None and result is not None and outcome.content == result.content \
                and outcome.success == result.success:
            return output
        return self._message(request, outcome.content, outcome.success)

    def wrap_tool_call(self, request: Any, handler: Callable[[Any], Any]) -> Any:
        run = self._run(request.state)
        try:
            planned = self._plan(run, request)
            if planned.result is not None:
                return self._finish(run, request, planned, None)
            try:
                output = handler(self._request_of(request, planned))
            except GraphInterrupt:
                raise
            except Exception as e:
                run.tool_failed(planned, e)
                raise
            return self._finish(run, request, planned, output)
        except GraphInterrupt:
            # LangGraph's `interrupt()` (a human's turn) pauses the run, it does not end
            # it: the tool runs again, decided again, when the graph resumes. Any other
            # bubble-up (a subgraph's `Command.PARENT`) carries what no control judged,
            # and fails the run below.
            raise
        except Exception as e:
            self._fail(run, e)
            raise

    async def awrap_tool_call(self, request: Any, handler: Callable[[Any], Awaitable[Any]]) -> Any:
        run = self._run(request.state)
        try:
            planned = await asyncio.to_thread(self._plan, run, request)
            if planned.result is not None:
                return await asyncio.to_thread(self._finish, run, request, planned, None)
            try:
                output = await handler(self._request_of(request, planned))
            except GraphInterrupt:
                raise
            except Exception as e:
                await asyncio.to_thread(run.tool_failed, planned, e)
                raise
            return await asyncio.to_thread(self._finish, run, request, planned, output)
        except GraphInterrupt:
            raise
        except Exception as e:
            await asyncio.to_thread(self._fail, run, e)
            raise
