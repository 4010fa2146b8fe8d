"""Adds the generated gRPC client of this checkout (clients/python) as a dependency.

A PEP 508 direct reference needs an absolute file URL, which a static
pyproject.toml cannot hold for a checkout that may live anywhere, so it is
computed here from this file's location.
"""

from pathlib import Path

from setuptools import setup

CLIENT = Path(__file__).resolve().parent.parent.parent / "clients" / "python"

setup(install_requires=[f"agenthooks-client @ {CLIENT.as_uri()}"])
