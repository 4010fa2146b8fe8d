"""agenthooks for the OpenAI Agents SDK (`openai-agents`): run hooks, a tool wrapper and a model-input filter.

    from agents import Agent
    from agenthooks_integrations.openai_agents import AgentHooks

    agenthooks = AgentHooks(user_id="user-1", identifier="weather")
    agent = Agent(name="assistant", model=model, tools=agenthooks.wrap_tools([get_weather]))
    result = await agenthooks.run(agent, "What is the weather in Paris?")

`AgentHooks.run` is `Runner.run` with one run's `hooks` (an `AgentHooksRun`,
the SDK's `RunHooks`) and `run_config` (a copy of yours with
`call_model_input_filter` set), and it completes the operation with reason
`error` when the run raises. To call `Runner.run` yourself, take both from
`agenthooks.start_run()` and call `run.fail(error)` when it raises.

What each part does (the spec's names):

- `call_model_input_filter`, before each model call: `beforeStep` (Dispatch,
  awaited), then `transformContext` (Modify) on the input items, for this call.
- `on_llm_end`: records each function call's step, position and assistant
  message for the tool events; `afterStep` (Dispatch, awaited) goes out here
  when the model asked for no tool, else once the step's tools ran (at the
  next model call or at completion).
- the wrapped tools' `on_invoke_tool`: `beforeToolCall` (Modify: argument
  rewrite or an answer in the tool's place), `DecideToolCall` (allow runs the
  tool, deny's blocked result is the output the model sees, mock's result stands
  in), the tool, `DecideToolResult`, then `afterToolCall` (Dispatch);
  `onToolCallError` when the tool function raises (then the tool's own failure
  policy applies: by default the SDK's error message becomes the output).
- `on_agent_end` (the final output): `CompleteOperation` (`onComplete`, reason `done`).

- `AgentHooks.model(model)`, optional: `beforeProviderPayload` on the call's
  `ModelSettings` before each model call (the answered payload replaces them).

Not mapped: `shouldStopAfterTurn` (the SDK has no stop between turns for run
hooks to take).

Ids: `toolCallId` is the function call's `call_id`; `assistantMessageId` the
id of the response's assistant message item, else the response's
`response_id`, else `<operationId>:assistant:<stepIndex>`; `callIndex` the
function call's position among the response's function calls; `stepIndex`
counts model calls from 0.

Messages sent to `transformContext` (hookbus-hooks.md's shape): easy input
messages and message items as `{"role":"user"|"system"|"assistant","content":<text>}`
(`id` when the item has one); function calls join the assistant message
before them as `toolCalls: [{"id": call_id, "name", "arguments": <parsed>}]`;
function call outputs are `{"role":"toolResult","toolCallId","toolName","content","isError":false}`;
any other item is `{"role":"item","item":<the item>}`, which must be answered
unchanged. They are turned back into input items only when a hook changed them.
"""

from __future__ import annotations

import asyncio
import contextvars
import dataclasses
import json
import threading
from collections.abc import AsyncIterator, Iterable
from typing import Any

from agents import (
    Agent,
    FunctionTool,
    Model,
    ModelSettings,
    RunConfig,
    RunContextWrapper,
    RunHooks,
    Runner,
)
from agents.items import ModelResponse
from agents.run_config import CallModelData, ModelInputData
from agents.tool_context import ToolContext

from agenthooks_client.v1 import events_pb2, hooks_pb2
from agenthooks_integrations.core import (
    AgentHooksError,
    Handler,
    RunState,
    Settings,
    SidecarClient,
    text_of,
)

# Marks the copy `wrap_tool` makes of a function tool.
_GATED = "_agenthooks_gated"


def _tool_name(tool: Any) -> str:
    """A tool's name (hosted tools have one too), or its class name."""
    name = getattr(tool, "name", None)
    return name if isinstance(name, str) else type(tool).__name__


__all__ = ["AgentHooks", "AgentHooksRun", "AgentHooksError", "to_spec_messages",
           "from_spec_messages"]

# The run whose model call is under way: set by the run's input filter (awaited in
# the run loop's own context, right before the model call) and by AgentHooks.run.
_current_run: contextvars.ContextVar[AgentHooksRun | None] = contextvars.ContextVar(
    "agenthooks_run", default=None)


def _agenthooks_error_in(error: BaseException) -> AgentHooksError | None:
    """The `AgentHooksError` that `error` is, or wraps (its causes, then contexts)."""
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        if isinstance(current, AgentHooksError):
            return current
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return None


def _get(item: Any, key: str, default: Any = None) -> Any:
    if isinstance(item, dict):
        return item.get(key, default)
    return getattr(item, key, default)


def to_spec_messages(items: list[Any]) -> list[dict[str, Any]]:
    """Responses-format input items as hookbus-hooks.md messages (see the module doc)."""
    out: list[dict[str, Any]] = []
    names: dict[str, str] = {}
    for item in items:
        raw = item if isinstance(item, dict) else item.model_dump(exclude_none=True)
        kind, role = raw.get("type"), raw.get("role")
        if kind == "function_call":
            try:
                args = json.loads(raw.get("arguments") or "{}")
            except json.JSONDecodeError:
                args = {"_raw": raw.get("arguments")}
            names[raw["call_id"]] = raw["name"]
            call = {"id": raw["call_id"], "name": raw["name"], "arguments": args}
            last = out[-1] if out else None
            if last is not None and last.get("role") == "assistant":
                last.setdefault("toolCalls", []).append(call)
            else:
                out.append({"role": "assistant", "content": "", "toolCalls": [call]})
        elif kind == "function_call_output":
            output = raw.get("output")
            out.append({"role": "toolResult", "toolCallId": raw["call_id"],
                        "toolName": names.get(raw["call_id"], ""),
                        "content": output if isinstance(output, str) else text_of(output),
                        "isError": False})
        elif role in ("user", "system", "developer", "assistant") and kind in (None, "message"):
            d: dict[str, Any] = {"role": "system" if role == "developer" else role,
                                 "content": text_of(raw.get("content"))}
            if raw.get("id"):
                d["id"] = raw["id"]
            out.append(d)
        else:
            out.append({"role": "item", "item": raw})
    return out


def from_spec_messages(messages: list[Any]) -> list[Any]:
    """hookbus-hooks.md messages back to input items; an unknown role is an error."""
    items: list[Any] = []
    for d in messages:
        if not isinstance(d, dict):
            raise AgentHooksError("agenthooks transformContext answered a message that is not an object")
        role = d.get("role")
        if role in ("user", "system"):
            items.append({"role": role, "content": str(d.get("content", ""))})
        elif role == "assistant":
            if d.get("content") or not d.get("toolCalls"):
                items.append({"role": "assistant", "content": str(d.get("content", ""))})
            for c in d.get("toolCalls") or []:
                items.append({"type": "function_call", "call_id": c.get("id"), "name": c.get("name"),
                              "arguments": json.dumps(c.get("arguments") or {})})
        elif role == "toolResult":
            items.append({"type": "function_call_output", "call_id": d.get("toolCallId"),
                          "output": str(d.get("content", ""))})
        elif role == "item" and isinstance(d.get("item"), dict):
            items.append(d["item"])
        else:
            raise AgentHooksError(f"agenthooks transformContext answered a message of role {role!r}")
    return items


@dataclasses.dataclass
class _CallSite:
    """Where a function call came from: its step, position and assistant message."""

    step_index: int
    call_index: int
    assistant_message_id: str | None


class AgentHooksRun(RunHooks):
    """One run (one operation): the SDK's run hooks plus the run's `run_config`."""

    def __init__(self, owner: AgentHooks, state: RunState, run_config: RunConfig | None) -> None:
        super().__init__()
        self._owner = owner
        self.state = state
        self.run_config = dataclasses.replace(run_config or RunConfig(),
                                              call_model_input_filter=self._filter)
        self._calls: dict[str, _CallSite] = {}

    @property
    def operation_id(self) -> str:
        return self.state.operation_id

    def _before_model(self, items: list[Any]) -> list[Any] | None:
        self.state.before_step()
        result = self.state.modify(hooks_pb2.MODIFY_POINT_TRANSFORM_CONTEXT, {
            "messages": to_spec_messages(items), "iteration": self.state.iteration})
        if isinstance(result.get("messages"), list):
            return from_spec_messages(result["messages"])
        return None

    async def _filter(self, data: CallModelData[Any]) -> ModelInputData:
        _current_run.set(self)
        try:
            items = await asyncio.to_thread(self._before_model, list(data.model_data.input))
        except Exception as e:
            await self.afail(e)
            raise
        if items is None:
            return data.model_data
        return ModelInputData(input=items, instructions=data.model_data.instructions)

    def _after_model(self, response: ModelResponse) -> None:
        message_id, texts, calls = None, [], []
        for item in response.output:
            kind = _get(item, "type")
            if kind == "message" and _get(item, "role") == "assistant":
                message_id = message_id or _get(item, "id")
                texts.append(text_of([_get(p, "text") for p in _get(item, "content", [])
                                      if _get(p, "type") == "output_text"]))
            elif kind == "function_call":
                calls.append(_get(item, "call_id"))
        assistant_id = message_id or response.response_id
        for index, call_id in enumerate(calls):
            self._calls[call_id] = _CallSite(self.state.step_index, index, assistant_id)
        self.state.after_model("".join(texts), len(calls))

    async def on_llm_end(self, context: RunContextWrapper[Any], agent: Agent[Any],
                         response: ModelResponse) -> None:
        try:
            await asyncio.to_thread(self._after_model, response)
        except Exception as e:
            await self.afail(e)
            raise

    async def on_agent_start(self, context: Any, agent: Agent[Any]) -> None:
        # Each agent the run starts (a handoff's too), before its model or tools run:
        # `Runner.run` called with `start_run`'s hooks gets the check `run` makes.
        try:
            self._owner.check_gated(agent)
        except AgentHooksError as e:
            await self.afail(e)
            raise

    async def on_agent_end(self, context: Any, agent: Agent[Any], output: Any) -> None:
        self._owner._forget(self)
        await asyncio.to_thread(self.state.complete)

    def fail(self, error: BaseException) -> None:
        """Completes the operation with reason `error` (`onComplete`, then `onError`), once."""
        self._owner._forget(self)
        self.state.complete(error)

    async def afail(self, error: BaseException) -> None:
        await asyncio.to_thread(self.fail, error)

    def call_site(self, call_id: str) -> _CallSite:
        site = self._calls.get(call_id)
        if site is None:
            raise AgentHooksError(f"agenthooks saw no model response with function call {call_id}")
        return site


class _PayloadHookedModel(Model):
    """A Model that runs `beforeProviderPayload` on its settings before each call."""

    def __init__(self, inner: Model) -> None:
        self._inner = inner

    async def _settings(self, model_settings: ModelSettings) -> ModelSettings:
        run = _current_run.get()
        if run is None:
            raise AgentHooksError("agenthooks: the model was called outside a run of AgentHooks")
        payload = {k: v for k, v in model_settings.to_json_dict().items() if v is not None}
        try:
            result = await asyncio.to_thread(run.state.modify,
                                             hooks_pb2.MODIFY_POINT_BEFORE_PROVIDER_PAYLOAD,
                                             {"model": type(self._inner).__name__,
                                              "payload": payload})
        except Exception as e:
            await run.afail(e)
            raise
        answered = result.get("payload")
        if not isinstance(answered, dict):
            return model_settings
        try:
            return ModelSettings(**answered)
        except Exception as e:
            error = AgentHooksError(f"agenthooks beforeProviderPayload answered invalid settings: {e}")
            await run.afail(error)
            raise error from e

    async def get_response(self, system_instructions: Any, input: Any,
                           model_settings: ModelSettings, *args: Any, **kwargs: Any) -> Any:
        settings = await self._settings(model_settings)
        return await self._inner.get_response(system_instructions, input, settings, *args, **kwargs)

    async def stream_response(self, system_instructions: Any, input: Any,
                              model_settings: ModelSettings, *args: Any,
                              **kwargs: Any) -> AsyncIterator[Any]:
        settings = await self._settings(model_settings)
        async for event in self._inner.stream_response(system_instructions, input, settings,
                                                        *args, **kwargs):
            yield event

    async def close(self) -> None:
        await self._inner.close()


class AgentHooks:
    """Connects OpenAI Agents SDK runs to the agenthooks sidecar (see the module doc).

    Args:
        target: the sidecar's gRPC address (`host:port` or `unix:/path`).
        user_id, agent_id: `userId`, `agentId` (omitted from tool events when None).
        identifier: the toolset's `identifier`, default `"default"`; `apiName` is the tool's name.
        timeout: seconds per sidecar call.
        notifications_fail_open: events that cannot be delivered are logged and the run
            goes on; decisions always fail closed.
        channel: a gRPC channel to use instead of one to `target`.
        handler: a local handler (`core.Handler`), served over a Handle stream
            attached for each run's operation (hooks registered with `handler: true`).
    """

    def __init__(self, *, target: str = Settings.target, user_id: str | None = None,
                 agent_id: str | None = None, identifier: str = Settings.identifier,
                 timeout: float = Settings.timeout, notifications_fail_open: bool = False,
                 channel: Any = None, handler: Handler | None = None) -> None:
        self.settings = Settings(target=target, user_id=user_id, agent_id=agent_id,
                                 identifier=identifier, timeout=timeout,
                                 notifications_fail_open=notifications_fail_open)
        self.client = SidecarClient(self.settings, channel, handler)
        self._runs: dict[int, AgentHooksRun] = {}
        self._lock = threading.Lock()
        # What `wrap_tools(..., ungated=...)` let through to run undecided: the tool
        # objects themselves (by identity, not name: another tool of that name is
        # still refused), and MCP servers by name.
        self._ungated_tools: dict[int, Any] = {}
        self._ungated_names: set[str] = set()

    def start_run(self, operation_id: str | None = None,
                  run_config: RunConfig | None = None) -> AgentHooksRun:
        """A new run (operation): pass its `hooks` and `run_config` to `Runner.run`."""
        state = RunState(self.client) if operation_id is None else RunState(
            self.client, operation_id=operation_id)
        state.start()
        run = AgentHooksRun(self, state, run_config)
        with self._lock:
            self._runs[id(run.run_config)] = run
        return run

    def _forget(self, run: AgentHooksRun) -> None:
        with self._lock:
            if self._runs.get(id(run.run_config)) is run:
                del self._runs[id(run.run_config)]

    def _run_of(self, ctx: ToolContext[Any]) -> AgentHooksRun:
        with self._lock:
            run = self._runs.get(id(ctx.run_config))
        if run is None or run.run_config is not ctx.run_config:
            raise AgentHooksError(
                f"agenthooks: tool {ctx.tool_name} ran outside a run started by AgentHooks "
                "(pass run.hooks and run.run_config of AgentHooks.start_run() to Runner.run)")
        return run

    async def run(self, agent: Agent[Any], input: Any, *, operation_id: str | None = None,
                  run_config: RunConfig | None = None, **kwargs: Any) -> Any:
        """`Runner.run` as one operation; a run that raises completes with reason `error`.

        Refuses (AgentHooksError, before anything runs) an agent, or an agent it can
        hand off to, with a tool that did not go through `wrap_tools` or an MCP
        server, unless `wrap_tools(..., ungated=...)` named it: such a tool would run
        with no decision.
        """
        self.check_gated(agent)
        run = self.start_run(operation_id, run_config)
        token = _current_run.set(run)
        try:
            return await Runner.run(agent, input, hooks=run, run_config=run.run_config, **kwargs)
        except Exception as e:
            await run.afail(e)
            # The SDK wraps a tool's exception (its `UserError`, "Error running tool ...");
            # an agenthooks failure inside a tool still fails the run as `AgentHooksError`.
            inner = _agenthooks_error_in(e)
            if inner is not None and inner is not e:
                raise inner  # its own cause (the gRPC error) stays with it
            raise
        finally:
            _current_run.reset(token)

    def model(self, model: Model) -> Model:
        """The model with `beforeProviderPayload` run before each call.

        The point's context is `{"model": <the model's class name>, "payload": <the
        call's ModelSettings as JSON, unset ones left out>}`; an answered `payload`
        replaces the settings. For a model named by a string, wrap the `Model` your
        provider makes for it.
        """
        return _PayloadHookedModel(model)

    def wrap_tools(self, tools: list[Any], *, ungated: Iterable[str] = ()) -> list[Any]:
        """The tools with each function tool's calls decided by the sidecar.

        Only a function tool's calls pass through the adapter. Another tool (a hosted
        tool such as `WebSearchTool`, a shell, computer, patch or custom tool) would
        run with no decision, so it is refused with AgentHooksError unless its name is
        in `ungated`, which passes it through as it is. Name an agent's MCP servers
        there too, or `run` refuses the agent.
        """
        allowed = set(ungated)
        wrapped = []
        passed: list[Any] = []
        for tool in tools:
            if isinstance(tool, FunctionTool):
                wrapped.append(self.wrap_tool(tool))
                continue
            name = _tool_name(tool)
            if name not in allowed:
                raise AgentHooksError(
                    f"agenthooks: tool {name!r} is a {type(tool).__name__}, whose calls "
                    "agenthooks cannot decide (only function tools are wrapped); name it in "
                    "wrap_tools(..., ungated=...) to let it run undecided")
            wrapped.append(tool)
            passed.append(tool)
        with self._lock:
            # The objects are kept alive with their ids, so an id is never reused.
            self._ungated_tools.update((id(t), t) for t in passed)
            self._ungated_names |= allowed
        return wrapped

    def check_gated(self, agent: Agent[Any]) -> None:
        """Refuses an agent with a tool no decision covers; see `run`.

        Follows every agent the run can reach: handoffs (an `Agent` or a `Handoff`
        to one) and the agents behind `agent.as_tool()` tools, which run their own
        tools with the outer run's config.
        """
        with self._lock:
            ungated_tools = set(self._ungated_tools)
            ungated_names = set(self._ungated_names)
        seen: set[int] = set()
        pending = [agent]
        while pending:
            current = pending.pop()
            if id(current) in seen:
                continue
            seen.add(id(current))
            for tool in current.tools:
                inner = getattr(tool, "_agent_instance", None)
                if getattr(tool, "_is_agent_tool", False) and isinstance(inner, Agent):
                    pending.append(inner)
                if getattr(tool, _GATED, False) or id(tool) in ungated_tools:
                    continue
                raise AgentHooksError(
                    f"agenthooks: tool {_tool_name(tool)!r} of agent {current.name!r} would "
                    "run with no decision: pass the agent's tools through AgentHooks.wrap_tools()")
            for server in getattr(current, "mcp_servers", None) or []:
                name = getattr(server, "name", type(server).__name__)
                if name not in ungated_names:
                    raise AgentHooksError(
                        f"agenthooks: the tools of MCP server {name!r} of agent "
                        f"{current.name!r} would run with no decision; name it in "
                        "wrap_tools(..., ungated=...) to let them")
            for handoff in current.handoffs:
                if isinstance(handoff, Agent):
                    pending.append(handoff)
                    continue
                ref = getattr(handoff, "_agent_ref", None)
                target = ref() if callable(ref) else None
                if not isinstance(target, Agent):
                    raise AgentHooksError(
                        f"agenthooks: handoff {getattr(handoff, 'agent_name', handoff)!r} of "
                        f"agent {current.name!r} names no agent agenthooks can check")
                pending.append(target)

    def wrap_tool(self, tool: FunctionTool) -> FunctionTool:
        """A copy of a function tool whose every call goes through the tool-call flow."""
        original = tool.on_invoke_tool
        # The invoker that raises the tool function's exceptions (the SDK's own wraps it
        # in its failure handler), so that onToolCallError can be dispatched first.
        raw = getattr(original, "_invoke_tool_impl", None)
        adapter = self

        async def run_tool(ctx: ToolContext[Any], input_json: str) -> Any:
            run = adapter._run_of(ctx)
            state = run.state
            try:
                args = json.loads(input_json or "{}")
            except json.JSONDecodeError as e:
                raise AgentHooksError(f"agenthooks: arguments of {tool.name} are not JSON") from e
            site = run.call_site(ctx.tool_call_id)
            try:
                planned = await asyncio.to_thread(lambda: state.plan_tool_call(state.tool_context(
                    tool_call_id=ctx.tool_call_id, api_name=tool.name, args=args,
                    assistant_message_id=site.assistant_message_id, call_index=site.call_index,
                    step_index=site.step_index), args))
                if planned.result is not None:
                    outcome = await asyncio.to_thread(state.finish_tool_call, planned, None)
                    return outcome.content
                # The model's own JSON unless a hook rewrote the arguments.
                tool_input = (input_json if input_json and not planned.rewritten
                              else json.dumps(planned.args))
                output, success = await adapter._invoke(tool, original, raw, ctx, tool_input,
                                                        planned, state)
                result = events_pb2.ToolResult(content=output if isinstance(output, str)
                                               else str(output), success=success)
                outcome = await asyncio.to_thread(state.finish_tool_call, planned, result)
                if outcome.content == result.content and outcome.success == result.success:
                    return output
                return outcome.content
            except Exception as e:
                await run.afail(e)
                raise

        gated = dataclasses.replace(tool, on_invoke_tool=run_tool)
        setattr(gated, _GATED, True)
        return gated

    @staticmethod
    async def _invoke(tool: FunctionTool, original: Any, raw: Any, ctx: ToolContext[Any],
                      input_json: str, planned: Any, state: RunState) -> tuple[Any, bool]:
        """Runs the tool on `input_json` (the planned arguments): (output, success)."""
        if raw is None:
            return await original(ctx, input_json), True
        try:
            return await raw(ctx, input_json), True
        except Exception as e:
            await asyncio.to_thread(state.tool_failed, planned, e)
            # The tool's own failure policy: the SDK's error message for the model, or raise.
            from agents.tool import maybe_invoke_function_tool_failure_error_function

            handled = await maybe_invoke_function_tool_failure_error_function(
                function_tool=tool, context=ctx, error=e)
            if handled is None:
                raise
            return handled, False
