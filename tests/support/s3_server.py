"""A real S3-compatible server (moto's server mode) on 127.0.0.1 with one bucket, for tests of memories on
object storage; yields the standard AWS variables that reach it (the only way m3 gets credentials)."""

from __future__ import annotations

import contextlib
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def s3_server(bucket: str, log_dir: Path, secret: str = "m3-test-secret") -> Iterator[dict[str, str]]:
    import boto3

    port = _free_port()
    with open(log_dir / "moto.log", "wb") as log:
        server = subprocess.Popen(
            [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)], stdout=log, stderr=log
        )
        env = {
            "AWS_ACCESS_KEY_ID": "m3-test-key",
            "AWS_SECRET_ACCESS_KEY": secret,
            "AWS_REGION": "us-east-1",
            "AWS_DEFAULT_REGION": "us-east-1",
            "AWS_ENDPOINT_URL": f"http://127.0.0.1:{port}",
            "AWS_ALLOW_HTTP": "true",
        }
        try:
            deadline = time.monotonic() + 60
            while True:
                try:
                    socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                    break
                except OSError:
                    if time.monotonic() > deadline or server.poll() is not None:
                        raise RuntimeError("moto server did not start") from None
                    time.sleep(0.1)
            boto3.client(
                "s3",
                endpoint_url=env["AWS_ENDPOINT_URL"],
                aws_access_key_id=env["AWS_ACCESS_KEY_ID"],
                aws_secret_access_key=secret,
                region_name="us-east-1",
            ).create_bucket(Bucket=bucket)
            yield env
        finally:
            server.terminate()
            server.wait(timeout=10)
