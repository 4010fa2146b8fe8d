"""agenthooks adapters for Python agent frameworks.

- `agenthooks_integrations.langchain.AgentHooksMiddleware`: LangChain v1
  (`langchain.agents.create_agent`) middleware.
- `agenthooks_integrations.openai_agents.AgentHooks`: OpenAI Agents SDK run
  hooks, tool wrapper and model-input filter.

Both are thin over the generated gRPC client (`agenthooks_client`) and share
`core`: the sidecar calls, one run's ids, and the tool-call flow.
"""

from agenthooks_integrations.core import (
    AgentHooksError,
    Handler,
    Settings,
    mock_reply,
    modified_reply,
)

__all__ = ["AgentHooksError", "Handler", "Settings", "mock_reply", "modified_reply"]
