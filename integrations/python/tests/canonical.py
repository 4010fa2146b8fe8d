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
call, the JSON of the messages the model got) and `error` (the run's error
text, if it failed). Every scenario is the same run; they differ in the hooks
the caller registered, except:
- `redact`: the prompt also holds a card number (`CARD`);
- `down`: the run goes to `--down-target` (where no sidecar listens) with
  notifications failing open, so that the first decision is what fails.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from typing import Any

PROMPT = "What is the weather in Paris?"
CARD = "4111 1111 1111 1111"
TOOL_CALL_ID = "call_weather_1"
TOOL_NAME = "get_weather"
TOOL_ARGS = {"city": "Paris"}
FINAL = "It is sunny in Paris."
SETTINGS = {"user_id": "user-1", "agent_id": "agent-1", "identifier": "weather"}


class Recorder:
    """What the scripted model saw and what the tool got, per run."""

    def __init__(self) -> None:
        self.tool_args: list[dict[str, Any]] = []
        self.model_inputs: list[str] = []

    def weather(self, city: str) -> str:
        self.tool_args.append({"city": city})
        return f"sunny in {city}"


# ---- LangChain v1 ------------------------------------------------------------------------

def langchain_run(target: str, operation_id: str, prompt: str, rec: Recorder,
                  fail_open: bool) -> str:
    from langchain.agents import create_agent
    from langchain_core.language_models.chat_models import BaseChatModel
    from langchain_core.messages import AIMessage, BaseMessage
    from langchain_core.outputs import ChatGeneration, ChatResult
    from langchain_core.tools import tool
    from langchain_core.utils.function_calling import convert_to_openai_tool

    from agenthooks_integrations.langchain import AgentHooksMiddleware, to_spec_messages

    class ScriptedChatModel(BaseChatModel):
        """A chat model that answers from a script and records what it got; supports bind_tools."""

        calls: int = 0

        @property
        def _llm_type(self) -> str:
            return "scripted"

        def bind_tools(self, tools: Any, *, tool_choice: Any = None, **kwargs: Any) -> Any:
            return self.bind(tools=[convert_to_openai_tool(t) for t in tools], **kwargs)

        def _generate(self, messages: list[BaseMessage], stop: Any = None,
                      run_manager: Any = None, **kwargs: Any) -> ChatResult:
            rec.model_inputs.append(json.dumps(to_spec_messages(messages)))
            self.calls += 1
            if self.calls == 1:
                message = AIMessage(content="", tool_calls=[
                    {"id": TOOL_CALL_ID, "name": TOOL_NAME, "args": dict(TOOL_ARGS),
                     "type": "tool_call"}])
            else:
                message = AIMessage(content=FINAL)
            return ChatResult(generations=[ChatGeneration(message=message)])

    @tool
    def get_weather(city: str) -> str:
        """The weather in a city."""
        return rec.weather(city)

    middleware = AgentHooksMiddleware(target=target, operation_id=operation_id,
                                      notifications_fail_open=fail_open, **SETTINGS)
    agent = create_agent(ScriptedChatModel(), [get_weather], middleware=[middleware])
    try:
        state = agent.invoke({"messages": [{"role": "user", "content": prompt}]})
    finally:
        middleware.client.close()
    return str(state["messages"][-1].content)


# ---- OpenAI Agents SDK -------------------------------------------------------------------

def openai_agents_run(target: str, operation_id: str, prompt: str, rec: Recorder,
                      fail_open: bool) -> str:
    from agents import Agent, Model, ModelResponse, Usage, function_tool, set_tracing_disabled
    from openai.types.responses import (
        ResponseFunctionToolCall,
        ResponseOutputMessage,
        ResponseOutputText,
    )

    from agenthooks_integrations.openai_agents import AgentHooks, to_spec_messages

    # No trace export: nothing leaves the machine.
    set_tracing_disabled(True)

    class ScriptedModel(Model):
        """A Model that answers from a script and records the input items it got."""

        def __init__(self) -> None:
            self.calls = 0

        async def get_response(self, system_instructions: Any, input: Any, model_settings: Any,
                               tools: Any, output_schema: Any, handoffs: Any, tracing: Any,
                               **kwargs: Any) -> ModelResponse:
            items = [{"role": "user", "content": input}] if isinstance(input, str) else input
            rec.model_inputs.append(json.dumps(to_spec_messages(list(items))))
            self.calls += 1
            if self.calls == 1:
                output: list[Any] = [ResponseFunctionToolCall(
                    type="function_call", call_id=TOOL_CALL_ID, name=TOOL_NAME,
                    arguments=json.dumps(TOOL_ARGS), status="completed")]
            else:
                output = [ResponseOutputMessage(
                    id="msg_final", type="message", role="assistant", status="completed",
                    content=[ResponseOutputText(type="output_text", text=FINAL, annotations=[])])]
            return ModelResponse(output=output, usage=Usage(), response_id=None)

        def stream_response(self, *args: Any, **kwargs: Any) -> Any:
            raise NotImplementedError("the scripted model does not stream")

    @function_tool
    def get_weather(city: str) -> str:
        """The weather in a city."""
        return rec.weather(city)

    agenthooks = AgentHooks(target=target, notifications_fail_open=fail_open, **SETTINGS)
    agent = Agent(name="assistant", instructions="Answer about the weather.",
                  model=ScriptedModel(), tools=agenthooks.wrap_tools([get_weather]))
    try:
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


def run_scenario(runner: Any, scenario: str, operation_id: str,
                 args: argparse.Namespace) -> dict[str, Any]:
    """Runs one scenario as one operation; answers its line (see the module doc)."""
    rec = Recorder()
    prompt = f"{PROMPT} My card is {CARD}." if scenario == "redact" else PROMPT
    down = scenario == "down"
    line: dict[str, Any] = {"scenario": scenario, "operationId": operation_id}
    try:
        line["final"] = runner(args.down_target if down else args.target, operation_id,
                               prompt, rec, down)
    except Exception as e:
        line["error"] = f"{type(e).__name__}: {e}"
    line.update(toolRuns=len(rec.tool_args), toolArgs=rec.tool_args,
                modelInputs=rec.model_inputs)
    return line


if __name__ == "__main__":
    sys.exit(main())
