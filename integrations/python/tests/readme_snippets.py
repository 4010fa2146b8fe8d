"""Runs a Python snippet of README.md as a user would, with a scripted model.

    AGENTHOOKS_ADDRESS=127.0.0.1:PORT .venv/bin/python \
        integrations/python/tests/readme_snippets.py langchain|openai-agents

The snippet is the fenced `python` block between `<!-- python-snippet: NAME -->`
and `<!-- /python-snippet -->` in README.md. It runs as `__main__` with one
name given: `model`, the user's own model there, a scripted one here (see
scripted.py), so that nothing leaves the machine.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import scripted

README = Path(__file__).resolve().parents[3] / "README.md"


def snippet(name: str) -> str:
    text = README.read_text(encoding="utf-8")
    found = re.search(
        rf"<!-- python-snippet: {re.escape(name)} -->\s*```python\n(.*?)```\s*<!-- /python-snippet -->",
        text, re.S)
    if found is None:
        raise SystemExit(f"README.md has no python snippet {name!r}")
    return found.group(1)


def run(name: str, inputs: list[str]) -> None:
    """Runs the snippet `name`; the scripted model records what it got in `inputs`."""
    if name == "langchain":
        model = scripted.langchain_model(inputs)
    elif name == "openai-agents":
        from agents import set_tracing_disabled

        # No trace export: nothing leaves the machine.
        set_tracing_disabled(True)
        model = scripted.openai_agents_model(inputs)
    else:
        raise SystemExit(f"unknown snippet {name!r}")
    code = compile(snippet(name), f"README.md ({name})", "exec")
    exec(code, {"__name__": "__main__", "model": model})


def main() -> int:
    run(sys.argv[1], [])
    return 0


if __name__ == "__main__":
    sys.exit(main())
