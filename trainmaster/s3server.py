"""A local S3-compatible server for tests and the demo: versitygw (Apache-2.0, built from
its Go module like the other tools, family `versitygw`) with its posix backend, so a bucket
is a folder under `<root>/data` and an object a file in it.

It listens on the address it is given (loopback for tests; for the real nodes' pods, the
host's address on their storage network, trainmaster.cluster.storage_server_address),
with one root account whose keys are made up per run. `start` runs it for the caller (a
test stops it); `start_for_cluster` attaches it to a local cluster, so `trainmaster
cluster down` stops it with the cluster.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import subprocess
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trainmaster.cluster import _processes as procs
from trainmaster.errors import TrainmasterError
from trainmaster.toolchain import tool_path

REGION = "us-east-1"


class S3ServerError(TrainmasterError):
    """The local S3 server did not start or answer."""


@dataclass
class S3Server:
    endpoint: str
    access_key: str
    secret_key: str
    root: Path
    pid: int
    process: subprocess.Popen[bytes] | None = field(default=None, repr=False)
    """Set when this process started it (and so reaps it)."""

    def env(self) -> dict[str, str]:
        """The standard AWS variables that point a client at this server."""
        return {
            "AWS_ENDPOINT_URL": self.endpoint,
            "AWS_ACCESS_KEY_ID": self.access_key,
            "AWS_SECRET_ACCESS_KEY": self.secret_key,
            "AWS_REGION": REGION,
        }

    def client(self, access_key: str | None = None, secret_key: str | None = None) -> Any:
        """A client of the root account, or of the account whose keys are given."""
        import boto3
        from botocore.config import Config

        return boto3.session.Session().client(
            "s3", endpoint_url=self.endpoint, aws_access_key_id=access_key or self.access_key,
            aws_secret_access_key=secret_key or self.secret_key, region_name=REGION,
            config=Config(s3={"addressing_style": "path"}, max_pool_connections=16))

    def seed(self, bucket: str, objects: Mapping[str, bytes]) -> None:
        """Create `bucket` (if need be) and put each key's bytes."""
        client = self.client()
        with contextlib.suppress(client.exceptions.BucketAlreadyOwnedByYou):
            client.create_bucket(Bucket=bucket)
        for key, data in objects.items():
            client.put_object(Bucket=bucket, Key=key, Body=data)

    def create_user(self, access_key: str, secret_key: str) -> None:
        """Add an account of role `user`, which owns no bucket: a bucket policy grants it
        what it may do. Only on a server started with `users=True`."""
        env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "ADMIN_"))}
        # The admin keys in the environment, as the root keys are given to the server.
        env.update({"ADMIN_ACCESS_KEY_ID": self.access_key,
                    "ADMIN_SECRET_ACCESS_KEY": self.secret_key,
                    "ADMIN_ENDPOINT_URL": self.endpoint, "ADMIN_REGION": REGION})
        result = subprocess.run(
            [str(tool_path("versitygw")), "admin", "create-user", "--access", access_key,
             "--secret", secret_key, "--role", "user"],
            env=env, capture_output=True, text=True, timeout=30, check=False)
        if result.returncode != 0:
            raise S3ServerError(f"versitygw on {self.endpoint} did not create user "
                                f"{access_key}: {(result.stderr or result.stdout).strip()}")

    def alive(self) -> bool:
        if self.process is not None:
            return self.process.poll() is None
        return procs.alive(self.pid)

    def stop(self) -> None:
        procs.stop(self.pid)  # its process group: SIGTERM, then SIGKILL
        if self.process is not None:
            self.process.wait()


def _wait_ready(server: S3Server, log: Path, timeout: float) -> None:
    from botocore.exceptions import BotoCoreError, ClientError

    deadline = time.monotonic() + timeout
    client = server.client()
    while True:
        if not server.alive():
            tail = log.read_text(errors="replace")[-1500:] if log.exists() else ""
            raise S3ServerError(f"versitygw on {server.endpoint} exited; log {log}:\n{tail}")
        try:
            client.list_buckets()
            return
        except (BotoCoreError, ClientError) as exc:
            if time.monotonic() > deadline:
                server.stop()
                raise S3ServerError(f"versitygw on {server.endpoint} did not answer in "
                                    f"{timeout:.0f}s: {exc}; log {log}") from None
        time.sleep(0.2)


def _argv(root: Path, host: str, port: int, users: bool = False) -> list[str]:
    data = root / "data"
    data.mkdir(parents=True, exist_ok=True)
    iam: list[str] = []
    if users:  # its own account store, so accounts other than root can be made
        (root / "iam").mkdir(exist_ok=True)
        iam = ["--iam-dir", str(root / "iam")]
    return [str(tool_path("versitygw")), "--port", f"{host}:{port}", "--region", REGION,
            "--quiet", *iam, "posix", str(data)]


def _keys() -> tuple[str, str, dict[str, str]]:
    access, secret = f"tm{secrets.token_hex(6)}", secrets.token_hex(20)
    # In the environment, not on the command line, where any local user could read them.
    return access, secret, {"ROOT_ACCESS_KEY_ID": access, "ROOT_SECRET_ACCESS_KEY": secret}


def start(root: Path, host: str = "127.0.0.1", port: int = 0,
          timeout: float = 30.0, users: bool = False) -> S3Server:
    """Start versitygw on host:port (a free port when 0) over `<root>/data`; with `users`,
    accounts besides root can be created (S3Server.create_user, in `<root>/iam`)."""
    port = port or procs.free_port(host)
    argv = _argv(root, host, port, users)
    access, secret, keys = _keys()
    log = root / "versitygw.log"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "VGW_"))}
    with log.open("ab") as out:
        process = subprocess.Popen(
            argv, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            env={**env, **keys}, start_new_session=True)
    server = S3Server(f"http://{host}:{port}", access, secret, root, process.pid, process)
    _wait_ready(server, log, timeout)
    return server


def start_for_cluster(state_dir: Path, host: str, port: int,
                      timeout: float = 30.0) -> S3Server:
    """Start versitygw as a process of the local cluster in `state_dir` (its data in
    `<state_dir>/s3`): `trainmaster cluster down` stops it with the cluster."""
    from trainmaster.cluster import attach_process

    root = state_dir / "s3"
    access, secret, keys = _keys()
    entry = attach_process(state_dir, "versitygw", _argv(root, host, port), keys)
    server = S3Server(f"http://{host}:{port}", access, secret, root, entry.pid)
    _wait_ready(server, Path(entry.log), timeout)
    return server


@contextlib.contextmanager
def running(root: Path, host: str = "127.0.0.1", port: int = 0,
            users: bool = False) -> Iterator[S3Server]:
    server = start(root, host, port, users=users)
    try:
        yield server
    finally:
        server.stop()


__all__ = ["REGION", "S3Server", "S3ServerError", "running", "start", "start_for_cluster"]
