"""What every adapter promises, checked on the Python adapters against a real sidecar.

    .venv/bin/python integrations/python/tests/contract.py \
        --target 127.0.0.1:PORT --operation-id ID --checks a,b,...

Each check runs on its own operation, `<ID>-<check>`, whose hooks the caller
registered, and prints one JSON line: `check`, `operationId`, what it saw,
and `error` (the error text, if it failed). The checks:

- `exact-args-langchain`, `exact-args-openai-agents`: the scripted model asks
  for `get_weather` with `ARGS` (an int, and one above 2**53); `toolArgs` is
  the `repr` of what the tool got.
- `concurrent`: two tool calls of one run at once (two threads of the core
  flow) whose local handler answers each call only once both calls reached
  it (or after `BARRIER_SECONDS`); `met` counts the calls that saw the other
  one, `results` what the model would read.
- `provider-tool`: a LangChain agent whose tools hold a provider (built-in)
  tool, `{"type": "web_search_preview"}`; `toolRuns` and `modelCalls` count
  what ran.
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
from typing import Any

import scripted

ARGS = {"city": "Paris", "days": 3, "ref": 2**53 + 1}
SETTINGS = {"user_id": "user-1", "agent_id": "agent-1", "identifier": "weather"}
# Far below the sidecar's --handler-timeout (10 s by default): a handler that is
# not served concurrently waits this long, in vain, for the other call.
BARRIER_SECONDS = 5.0
CONCURRENT_MOCK = "mocked once both calls were in flight"


def exact_args_langchain(target: str, operation_id: str) -> dict[str, Any]:
    from langchain.agents import create_agent
    from langchain_core.tools import tool

    from agenthooks_integrations.langchain import AgentHooksMiddleware

    got: list[str] = []

    @tool
    def get_weather(city: str, days: int, ref: int) -> str:
        """The weather in a city."""
        got.append(repr({"city": city, "days": days, "ref": ref}))
        return f"sunny in {city}"

    middleware = AgentHooksMiddleware(target=target, operation_id=operation_id, **SETTINGS)
    model = scripted.langchain_model([], tool_args=ARGS)
    try:
        create_agent(model, [get_weather], middleware=[middleware]).invoke(
            {"messages": [{"role": "user", "content": "Weather?"}]})
    finally:
        middleware.client.close()
    return {"toolArgs": got}


def exact_args_openai_agents(target: str, operation_id: str) -> dict[str, Any]:
    import asyncio

    from agents import Agent, function_tool, set_tracing_disabled

    from agenthooks_integrations.openai_agents import AgentHooks

    set_tracing_disabled(True)
    got: list[str] = []

    @function_tool
    def get_weather(city: str, days: int, ref: int) -> str:
        """The weather in a city."""
        got.append(repr({"city": city, "days": days, "ref": ref}))
        return f"sunny in {city}"

    agenthooks = AgentHooks(target=target, **SETTINGS)
    try:
        model = agenthooks.model(scripted.openai_agents_model([], tool_args=ARGS))
        agent = Agent(name="assistant", instructions="Weather.", model=model,
                      tools=agenthooks.wrap_tools([get_weather]))
        asyncio.run(agenthooks.run(agent, "Weather?", operation_id=operation_id))
    finally:
        agenthooks.client.close()
    return {"toolArgs": got}


def concurrent(target: str, operation_id: str) -> dict[str, Any]:
    from agenthooks_integrations import mock_reply
    from agenthooks_integrations.core import RunState, Settings, SidecarClient

    in_flight = threading.Condition()
    arrived = 0
    met: list[bool] = []

    def handler(call: Any) -> Any:
        nonlocal arrived
        with in_flight:
            arrived += 1
            in_flight.notify_all()
            met.append(in_flight.wait_for(lambda: arrived >= 2, BARRIER_SECONDS))
        return mock_reply(CONCURRENT_MOCK)

    client = SidecarClient(Settings(target=target, operation_id=operation_id, **SETTINGS),
                           handler=handler)
    results: list[str] = []
    errors: list[str] = []
    try:
        state = RunState(client, operation_id=operation_id).start()

        def call(i: int) -> None:
            context = state.tool_context(tool_call_id=f"call-{i}", api_name="get_weather",
                                         args={"city": "Paris"}, assistant_message_id=None,
                                         call_index=i, step_index=0)
            try:
                outcome = state.run_tool_call(context, lambda args: "the real tool ran")
                results.append(outcome.content)
            except Exception as e:
                errors.append(f"{type(e).__name__}: {e}")

        threads = [threading.Thread(target=call, args=(i,)) for i in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        state.complete()
    finally:
        client.close()
    line: dict[str, Any] = {"met": sum(met), "results": sorted(results)}
    if errors:
        line["error"] = "; ".join(errors)
    return line


def provider_tool(target: str, operation_id: str) -> dict[str, Any]:
    from langchain.agents import create_agent
    from langchain_core.tools import tool

    from agenthooks_integrations.langchain import AgentHooksMiddleware

    runs: list[str] = []
    inputs: list[str] = []

    @tool
    def get_weather(city: str) -> str:
        """The weather in a city."""
        runs.append(city)
        return f"sunny in {city}"

    middleware = AgentHooksMiddleware(target=target, operation_id=operation_id, **SETTINGS)
    model = scripted.langchain_model(inputs)
    line: dict[str, Any] = {}
    try:
        create_agent(model, [get_weather, {"type": "web_search_preview"}],
                     middleware=[middleware]).invoke(
            {"messages": [{"role": "user", "content": "Weather?"}]})
    except Exception as e:
        line["error"] = f"{type(e).__name__}: {e}"
    finally:
        middleware.client.close()
    line.update(toolRuns=len(runs), modelCalls=len(inputs))
    return line


CHECKS = {
    "exact-args-langchain": exact_args_langchain,
    "exact-args-openai-agents": exact_args_openai_agents,
    "concurrent": concurrent,
    "provider-tool": provider_tool,
}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--target", required=True)
    parser.add_argument("--operation-id", required=True)
    parser.add_argument("--checks", default=",".join(CHECKS))
    args = parser.parse_args()
    for check in args.checks.split(","):
        operation_id = f"{args.operation_id}-{check}"
        line: dict[str, Any] = {"check": check, "operationId": operation_id}
        try:
            line.update(CHECKS[check](args.target, operation_id))
        except Exception as e:
            line["error"] = f"{type(e).__name__}: {e}"
        print(json.dumps(line), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
