"""The canonical scripted run of an agent framework, through its agenthooks adapter.

    .venv/bin/python integrations/python/tests/canonical.py \
        --framework langchain|openai-agents --target 127.0.0.1:PORT --operation-id ID

Configuration: userId `user-1`, agentId `agent-1`, identifier `weather`. A
scripted model (no network, no weights) asks in its first step for one tool
call, id `call_weather_1`, `get_weather({"city":"Paris"})`; the tool answers
`sunny in <city>`; the model's second step answers `It is sunny in Paris.`.
It prints one JSON line `{"final":...,"toolRuns":N}` and exits 0, or prints
the error on stderr and exits 1. It registers no hooks: the caller does.

With `--scenarios a,b,...` it runs one operation per scenario, with the id
`<ID>-<scenario>`, in this one process (the frameworks import slowly; the
canonical run is the scenario `canonical`), and
prints one JSON line per scenario: `scenario`, `operationId`, `final`,
`toolRuns`, `toolArgs` (the arguments the tool got), `modelInputs` (per model
call, the JSON of the messages the model got), `modelSettings` (per model call, the
keyword arguments bound to the model besides its tools, or its ModelSettings) and
`error` (the run's error text, if it failed). Every scenario is the same run; they differ in the hooks
the caller registered, except:
- `redact`: the prompt also holds a card number (`CARD`);
- `down`: the run goes to `--down-target` (where no sidecar listens) with
  notifications failing open, so that the first decision is what fails;
- `down-closed`: the same with notifications failing closed (the default);
- `toolerror`: the tool raises `TOOL_ERROR`;
- `handler`: the adapter serves a local handler that mocks the hook
  `mock-in-runtime` with `HANDLER_MOCK`;
- `readme`: the framework's README snippet runs (readme_snippets.py), with
  its own operation id; `final` is what it printed;
- `async`: LangChain runs the agent with `ainvoke` (the middleware's async
  hooks); the Agents SDK always runs async;
- `result-command` (LangChain): the tool answers a `Command` whose update holds
  its `ToolMessage`; `result-blocks` (LangChain): a `ToolMessage` whose content
  is a `json` block, not text;
- `interrupt` (LangChain): the tool calls LangGraph's `interrupt()` before it
  runs, and the graph resumes with an approval;
- `result-command-extra` (LangChain): the `Command` holds the call's
  `ToolMessage` ("ok") and the forecast in another message; `parent-command`
  (LangChain): the tool raises a subgraph's `Command.PARENT` holding the forecast;
- `no-user`: the adapter is made without a user id;
- `handoff-object`, `as-tool` (Agents SDK): the agent can hand off (with
  `handoff()`) to, or call as a tool, a helper agent whose tool is not wrapped;
  `start-run` (Agents SDK): `Runner.run` with `start_run`'s hooks, tool not
  wrapped; `name-collision` (Agents SDK): an ungated `WebSearchTool` and an
  unwrapped function tool named `web_search`;
- `ungated` (Agents SDK): the agent's tools also hold a `WebSearchTool`;
  `unwrapped` (Agents SDK): the agent's function tool did not go through
  `wrap_tools`.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import sys
from typing import Any

import scripted

PROMPT = "What is the weather in Paris?"
CARD = "4111 1111 1111 1111"
TOOL_ERROR = "the weather service is down"
HANDLER_MOCK = "cloudy in Paris (from the runtime's own handler)"
SETTINGS = {"user_id": "user-1", "agent_id": "agent-1", "identifier": "weather"}


def settings(scenario: str) -> dict[str, Any]:
    """The adapter's configuration: SETTINGS, without the user id in `no-user`."""
    return {k: v for k, v in SETTINGS.items() if not (scenario == "no-user" and k == "user_id")}


class Recorder:
    """What the scripted model saw and what the tool got, per run."""

    def __init__(self, tool_fails: bool = False) -> None:
        self.tool_fails = tool_fails
        self.tool_args: list[dict[str, Any]] = []
        self.model_inputs: list[str] = []
        self.model_settings: list[dict[str, Any]] = []

    def weather(self, city: str) -> str:
        self.tool_args.append({"city": city})
        if self.tool_fails:
            raise RuntimeError(TOOL_ERROR)
        return f"sunny in {city}"


# ---- LangChain v1 ------------------------------------------------------------------------

def local_handler(scenario: str) -> Any:
    """The `handler` scenario's local handler: mocks the hook `mock-in-runtime`."""
    if scenario != "handler":
        return None
    from agenthooks_integrations import mock_reply

    return lambda call: mock_reply(HANDLER_MOCK) if call.hook_id == "mock-in-runtime" else None


def langchain_run(target: str, operation_id: str, prompt: str, rec: Recorder,
                  scenario: str) -> str:
    from typing import Annotated

    from langchain.agents import create_agent
    from langchain_core.messages import HumanMessage, ToolMessage
    from langchain_core.tools import InjectedToolCallId, tool
    from langgraph.graph import START, StateGraph
    from typing_extensions import TypedDict
    from langgraph.checkpoint.memory import InMemorySaver
    from langgraph.types import Command, interrupt

    from agenthooks_integrations.langchain import AgentHooksMiddleware

    def get_weather(city, call_id):  # type: ignore[no-untyped-def]
        """The weather in a city."""
        if scenario == "interrupt" and interrupt({"approve": city}) is not True:
            return "not approved"
        forecast = rec.weather(city)
        if scenario == "result-command":
            return Command(update={"messages": [ToolMessage(forecast, tool_call_id=call_id)]})
        if scenario == "result-command-extra":
            # The call's own answer says little; the forecast rides along in another message.
            return Command(update={"messages": [ToolMessage("ok", tool_call_id=call_id),
                                                HumanMessage(forecast)]})
        if scenario == "parent-command":
            # A subgraph whose node answers for the parent graph: LangGraph raises it
            # through the tool (a `ParentCommand`) to the agent's graph.
            def answer(state: dict[str, Any]) -> Any:
                return Command(graph=Command.PARENT, update={
                    "messages": [ToolMessage(forecast, tool_call_id=state["call_id"])]})

            subgraph = StateGraph(TypedDict("SubState", {"call_id": str}))
            subgraph.add_node("answer", answer)
            subgraph.add_edge(START, "answer")
            subgraph.compile().invoke({"call_id": call_id})
            return "unreachable"
        if scenario == "result-blocks":
            return ToolMessage([{"type": "json", "json": {"forecast": forecast}}],
                               tool_call_id=call_id)
        return forecast

    # The types themselves, not the strings this module's annotations would be:
    # LangChain reads them to build the tool's schema and inject the call id.
    get_weather.__annotations__ = {"city": str,
                                   "call_id": Annotated[str, InjectedToolCallId],
                                   "return": Any}
    get_weather = tool(get_weather)

    middleware = AgentHooksMiddleware(target=target, operation_id=operation_id,
                                      notifications_fail_open=scenario == "down",
                                      handler=local_handler(scenario), **settings(scenario))
    model = scripted.langchain_model(rec.model_inputs, rec.model_settings)
    agent = create_agent(model, [get_weather], middleware=[middleware],
                         checkpointer=InMemorySaver() if scenario == "interrupt" else None)
    try:
        request = {"messages": [{"role": "user", "content": prompt}]}
        if scenario == "interrupt":
            # The tool asks a human (LangGraph's interrupt), then the graph resumes.
            config = {"configurable": {"thread_id": operation_id}}
            paused = agent.invoke(request, config)
            if "__interrupt__" not in paused:
                raise RuntimeError("the tool did not interrupt")
            state = agent.invoke(Command(resume=True), config)
            return str(state["messages"][-1].content)
        # The `async` scenario runs the middleware's async hooks (ainvoke).
        state = (asyncio.run(agent.ainvoke(request)) if scenario == "async"
                 else agent.invoke(request))
    finally:
        middleware.client.close()
    return str(state["messages"][-1].content)


# ---- OpenAI Agents SDK -------------------------------------------------------------------

def openai_agents_run(target: str, operation_id: str, prompt: str, rec: Recorder,
                      scenario: str) -> str:
    from agents import Agent, function_tool, set_tracing_disabled

    from agenthooks_integrations.openai_agents import AgentHooks

    # No trace export: nothing leaves the machine.
    set_tracing_disabled(True)

    @function_tool
    def get_weather(city: str) -> str:
        """The weather in a city."""
        return rec.weather(city)

    agenthooks = AgentHooks(target=target, notifications_fail_open=scenario == "down",
                            handler=local_handler(scenario), **settings(scenario))
    try:
        model = agenthooks.model(scripted.openai_agents_model(rec.model_inputs,
                                                              rec.model_settings))
        handoffs: list[Any] = []
        if scenario == "ungated":
            from agents import WebSearchTool

            tools = agenthooks.wrap_tools([get_weather, WebSearchTool()])
        elif scenario in ("unwrapped", "start-run"):
            tools = [get_weather]
        elif scenario == "name-collision":
            from agents import WebSearchTool

            # A hosted tool let through by name does not let through another of that name.
            ungated = agenthooks.wrap_tools([WebSearchTool()], ungated=["web_search"])
            tools = agenthooks.wrap_tools([get_weather]) + ungated + [
                dataclasses.replace(get_weather, name="web_search")]
        elif scenario in ("handoff-object", "as-tool"):
            from agents import handoff

            helper = Agent(name="helper", instructions="Helps.", model=model, tools=[get_weather])
            if scenario == "handoff-object":
                tools = agenthooks.wrap_tools([get_weather])
                handoffs = [handoff(helper)]
            else:
                tools = agenthooks.wrap_tools(
                    [get_weather, helper.as_tool(tool_name="ask_helper",
                                                 tool_description="Asks the helper.")])
        else:
            tools = agenthooks.wrap_tools([get_weather])
        agent = Agent(name="assistant", instructions="Answer about the weather.",
                      model=model, tools=tools, handoffs=handoffs)
        if scenario == "start-run":
            # `Runner.run` with the run's hooks and config, as the README shows.
            from agents import Runner

            run = agenthooks.start_run(operation_id)

            async def manual() -> Any:
                try:
                    return await Runner.run(agent, prompt, hooks=run,
                                            run_config=run.run_config)
                except Exception as e:
                    await run.afail(e)
                    raise

            result = asyncio.run(manual())
        else:
            result = asyncio.run(agenthooks.run(agent, prompt, operation_id=operation_id))
    finally:
        agenthooks.client.close()
    return str(result.final_output)


RUNNERS = {"langchain": langchain_run, "openai-agents": openai_agents_run}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--framework", required=True, choices=sorted(RUNNERS))
    parser.add_argument("--target", required=True)
    parser.add_argument("--operation-id", required=True)
    parser.add_argument("--scenarios", default="")
    parser.add_argument("--down-target", default="")
    args = parser.parse_args()
    runner = RUNNERS[args.framework]

    if not args.scenarios:
        line = run_scenario(runner, "canonical", args.operation_id, args)
        if "error" in line:
            print(f"canonical run failed: {line['error']}", file=sys.stderr)
            return 1
        print(json.dumps({"final": line["final"], "toolRuns": line["toolRuns"]}), flush=True)
        return 0
    for scenario in args.scenarios.split(","):
        line = run_scenario(runner, scenario, f"{args.operation_id}-{scenario}", args)
        print(json.dumps(line), flush=True)
    return 0


def readme_snippet(framework: str, target: str, rec: Recorder) -> str:
    """Runs the framework's README snippet (its operation id is its own); answers what it printed."""
    import contextlib
    import io
    import os

    import readme_snippets

    os.environ["AGENTHOOKS_ADDRESS"] = target
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        readme_snippets.run(framework, rec.model_inputs)
    return printed.getvalue().strip()


def run_scenario(runner: Any, scenario: str, operation_id: str,
                 args: argparse.Namespace) -> dict[str, Any]:
    """Runs one scenario as one operation; answers its line (see the module doc)."""
    rec = Recorder(tool_fails=scenario == "toolerror")
    prompt = f"{PROMPT} My card is {CARD}." if scenario == "redact" else PROMPT
    down = scenario in ("down", "down-closed")
    line: dict[str, Any] = {"scenario": scenario, "operationId": operation_id}
    try:
        if scenario == "readme":
            line["final"] = readme_snippet(args.framework, args.target, rec)
        else:
            line["final"] = runner(args.down_target if down else args.target, operation_id,
                                   prompt, rec, scenario)
    except Exception as e:
        line["error"] = f"{type(e).__name__}: {e}"
    line.update(toolRuns=len(rec.tool_args), toolArgs=rec.tool_args,
                modelInputs=rec.model_inputs, modelSettings=rec.model_settings)
    return line


if __name__ == "__main__":
    sys.exit(main())
