"""Verifies captured webhook requests with the PyPI `standardwebhooks` package.

Reads a JSON list of cases on stdin, each
  {"body": str, "headers": {name: value}, "secret": env var name, "shiftSeconds": int}
and prints a JSON list, one entry per case: "ok" or the error class name.
Secrets come from the environment, never from argv or stdin.
The receiver code is the README's Python snippet; `shiftSeconds` moves the
verifier's clock, so a replay minutes later can be checked without waiting.
"""
import json
import os
import sys
from datetime import datetime, timedelta

import standardwebhooks.webhooks as sw
from standardwebhooks import Webhook


def verify(secret: str, body: bytes, headers: dict) -> dict:
    # The README's receiver: the raw body and the three webhook-* headers.
    return Webhook(secret).verify(body, headers)


def shifted(seconds: int):
    class Shifted(datetime):
        @classmethod
        def now(cls, tz=None):
            return datetime.now(tz) + timedelta(seconds=seconds)

    return Shifted


def main() -> None:
    results = []
    for case in json.load(sys.stdin):
        sw.datetime = shifted(case.get("shiftSeconds", 0))
        try:
            verify(os.environ[case["secret"]], case["body"].encode("utf-8"), case["headers"])
            results.append("ok")
        except Exception as e:  # noqa: BLE001 - the class name is the answer
            results.append(type(e).__name__)
    print(json.dumps(results))


if __name__ == "__main__":
    main()
