#!/usr/bin/env bash
# Installs the Python framework adapters (integrations/python) into .venv, the
# way a user installs them, plus the pinned frameworks they are tested with:
#   - integrations/python/requirements.txt (LangChain v1, the OpenAI Agents SDK
#     and every package they pull in, pinned exactly), from PyPI;
#   - the adapters package, editable (so that the tests run this checkout's
#     code), with its extras; its dependency, the generated client of
#     clients/python, installs from this checkout.
# Idempotent: a stamp keeps the last install's inputs, and nothing is
# reinstalled while they are the same. Needs the venv that
# scripts/install-client-tools.sh makes (it calls this script at its end).
set -euo pipefail
cd "$(dirname "$0")/.."

bin="$(pwd)/.venv/bin"
stamp=.venv/.agenthooks-integrations.sha256
# What the install depends on: the pins, the package's metadata, the generated
# client that pip copies into the venv, and where the checkout is (the
# editable install points at it).
want="$( (pwd && cat integrations/python/requirements.txt integrations/python/pyproject.toml \
  integrations/python/setup.py clients/python/pyproject.toml \
  clients/python/agenthooks_client/v1/*.py) | sha256sum | cut -d' ' -f1)"
if [ "$(cat "${stamp}" 2>/dev/null)" = "${want}" ]; then
  exit 0
fi
"${bin}/pip" install --quiet --disable-pip-version-check -r integrations/python/requirements.txt
# No build isolation: the build uses the venv's pinned setuptools, not a fresh
# download. The client is reinstalled on purpose: regenerated code keeps its
# version number, which pip alone would take as already installed.
"${bin}/pip" install --quiet --disable-pip-version-check --no-build-isolation --no-deps \
  --force-reinstall ./clients/python
"${bin}/pip" install --quiet --disable-pip-version-check --no-build-isolation \
  -e './integrations/python[langchain,openai-agents]'
echo "${want}" >"${stamp}"
