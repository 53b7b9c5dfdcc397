"""The environment a `trainmaster` subprocess gets to reach a test's S3 server."""

from __future__ import annotations

import os

from trainmaster.s3server import S3Server


def server_env(server: S3Server, **changes: str | None) -> dict[str, str]:
    """This process's environment less any AWS_* setting, plus the server's endpoint and
    keys; each of `changes` sets a variable, or removes it when None."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env.update(server.env())
    for key, value in changes.items():
        if value is None:
            env.pop(key, None)
        else:
            env[key] = value
    return env
