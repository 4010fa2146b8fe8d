"""The scripted models of the tests: no network, no weights.

Each follows the canonical script: its first call asks for one tool call, id
`call_weather_1`, `get_weather({"city":"Paris"})`; every later call answers
`It is sunny in Paris.`. Each records, per call, the JSON of the messages it
got (hookbus-hooks.md's shape, via the adapter's converter) in `inputs`.
`tool_args` replaces the tool call's arguments.
"""

from __future__ import annotations

import json
from typing import Any

TOOL_CALL_ID = "call_weather_1"
TOOL_NAME = "get_weather"
TOOL_ARGS = {"city": "Paris"}
FINAL = "It is sunny in Paris."


def langchain_model(inputs: list[str], settings: list[dict[str, Any]] | None = None,
                    tool_args: dict[str, Any] | None = None) -> Any:
    """A LangChain chat model (BaseChatModel) that supports bind_tools.

    `settings` gets, per call, the keyword arguments bound to it besides `tools`.
    """
    from langchain_core.language_models.chat_models import BaseChatModel
    from langchain_core.messages import AIMessage, BaseMessage
    from langchain_core.outputs import ChatGeneration, ChatResult
    from langchain_core.utils.function_calling import convert_to_openai_tool

    from agenthooks_integrations.langchain import to_spec_messages

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
            inputs.append(json.dumps(to_spec_messages(messages)))
            if settings is not None:
                settings.append({k: v for k, v in kwargs.items() if k != "tools"})
            self.calls += 1
            if self.calls == 1:
                message = AIMessage(content="", tool_calls=[
                    {"id": TOOL_CALL_ID, "name": TOOL_NAME, "args": dict(tool_args or TOOL_ARGS),
                     "type": "tool_call"}])
            else:
                message = AIMessage(content=FINAL)
            return ChatResult(generations=[ChatGeneration(message=message)])

    return ScriptedChatModel()


def openai_agents_model(inputs: list[str], settings: list[dict[str, Any]] | None = None,
                        tool_args: dict[str, Any] | None = None) -> Any:
    """An OpenAI Agents SDK Model; `settings` gets each call's ModelSettings (set ones)."""
    from agents import Model, ModelResponse, Usage
    from openai.types.responses import (
        ResponseFunctionToolCall,
        ResponseOutputMessage,
        ResponseOutputText,
    )

    from agenthooks_integrations.openai_agents import to_spec_messages

    class ScriptedModel(Model):
        """A Model that answers from a script and records the input items it got."""

        def __init__(self) -> None:
            self.calls = 0

        async def get_response(self, system_instructions: Any, input: Any, model_settings: Any,
                               tools: Any, output_schema: Any, handoffs: Any, tracing: Any,
                               **kwargs: Any) -> ModelResponse:
            items = [{"role": "user", "content": input}] if isinstance(input, str) else input
            inputs.append(json.dumps(to_spec_messages(list(items))))
            if settings is not None:
                settings.append({k: v for k, v in model_settings.to_json_dict().items()
                                 if v is not None})
            self.calls += 1
            if self.calls == 1:
                output: list[Any] = [ResponseFunctionToolCall(
                    type="function_call", call_id=TOOL_CALL_ID, name=TOOL_NAME,
                    arguments=json.dumps(tool_args or TOOL_ARGS), status="completed")]
            else:
                output = [ResponseOutputMessage(
                    id="msg_final", type="message", role="assistant", status="completed",
                    content=[ResponseOutputText(type="output_text", text=FINAL, annotations=[])])]
            return ModelResponse(output=output, usage=Usage(), response_id=None)

        def stream_response(self, *args: Any, **kwargs: Any) -> Any:
            raise NotImplementedError("the scripted model does not stream")

    return ScriptedModel()
