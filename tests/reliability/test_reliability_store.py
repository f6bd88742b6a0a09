"""Object-store locations: credentials never shown, and every failure is one line.

Runs the real CLI against a real S3-compatible server (moto's server mode on 127.0.0.1, see
tests/support/s3_server.py): no bucket, no credentials, credentials inside the URI in every shape a
user pastes them (``@`` or ``/`` in the password, ``?api_key=``), for index, ask and report.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from m3cli.stages.core.redact import MASK, mask_credentials
from support.fake_openai import FakeOpenAI
from support.s3_memory import _records, m3_env
from support.s3_server import s3_server

SECRET = "Zq9-s3cr3t"
BUCKET = "memories"


@pytest.mark.parametrize(
    "url,shown",
    [
        (f"s3://AKIA:{SECRET}@bucket/mem.lance", f"s3://{MASK}@bucket/mem.lance"),
        (f"http://user:p@{SECRET}@host:8000/v1", f"http://{MASK}@host:8000/v1"),
        (f"s3://AKIA:{SECRET}/x+y@bucket/m", f"s3://{MASK}@bucket/m"),
        (f"http://host/v1?api_key={SECRET}&model=x", f"http://host/v1?api_key={MASK}&model=x"),
        (f"https://h/v1?x=1&access_token={SECRET}", f"https://h/v1?x=1&access_token={MASK}"),
        (f"s3://b/k?X-Amz-Signature={SECRET}", f"s3://b/k?X-Amz-Signature={MASK}"),
        ("https://host/users/@me", "https://host/users/@me"),  # no credential: left alone
    ],
)
def test_every_credential_shape_is_masked(url, shown):
    text = f"m3: error: {url} refused"
    assert mask_credentials(text) == f"m3: error: {shown} refused"
    assert SECRET not in mask_credentials(text)


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    pytest.importorskip("moto.server")
    pytest.importorskip("boto3")
    d = tmp_path_factory.mktemp("s3")
    _records(d / "r.jsonl")
    with s3_server(BUCKET, d, secret=SECRET) as env, FakeOpenAI() as embed:
        yield d, m3_env(env, embed, d / "cache")


def m3(env: dict, *args, drop: tuple[str, ...] = ()) -> tuple[int, list[str], bytes]:
    env = {k: v for k, v in env.items() if k not in drop}
    proc = subprocess.run(
        [sys.executable, "-m", "m3cli", *map(os.fsdecode, args)], capture_output=True, env=env, timeout=300
    )
    assert SECRET.encode() not in proc.stdout + proc.stderr
    return proc.returncode, proc.stderr.decode().strip().splitlines(), proc.stdout


NO_KEYS = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY")


@pytest.mark.slow
def test_object_store_failures_are_one_line(store):
    d, env = store
    recs = d / "r.jsonl"
    cases = [
        (("index", "-o", "s3://no-such-bucket/m.lance", recs), (), "bucket does not exist"),
        (("index", "-o", f"s3://{BUCKET}/m.lance", recs), NO_KEYS, "AWS_ACCESS_KEY_ID"),
        (("index", "-o", f"s3://AK:{SECRET}/z@{BUCKET}/m.lance", recs), (), "percent-encoded"),
    ]
    for args, drop, says in cases:
        rc, err, _ = m3(env, *args, drop=drop)
        assert rc == 1 and len(err) == 1 and err[0].startswith("m3: error: s3://"), (args, err)
        assert says in err[0]
    rc, err, _ = m3(env, "index", "-o", f"s3://{BUCKET}/m.lance", recs)
    assert rc == 0, err
    for args, drop, says in [
        (("ask", f"s3://{BUCKET}/m.lance", "who grows tomatoes?"), NO_KEYS, "AWS_ACCESS_KEY_ID"),
        (("ask", "s3://no-such-bucket/m.lance", "who?"), (), "no-such-bucket"),
        (("report", "s3://no-such-bucket/m.lance", "-o", d / "r.html"), (), "bucket does not exist"),
        (("report", f"s3://{BUCKET}/m.lance", "-o", d / "r.html"), NO_KEYS, "AWS_ACCESS_KEY_ID"),
    ]:
        rc, err, _ = m3(env, *args, drop=drop)
        assert rc == 1 and len(err) == 1 and "damaged" not in err[0], (args, err)
        assert says in err[0]


@pytest.mark.slow
def test_answers_and_report_keep_no_credentials(store):
    d, env = store
    rc, err, _ = m3(env, "index", "-o", f"s3://{BUCKET}/keys.lance", d / "r.jsonl")
    assert rc == 0, err
    # credentials also in the URI (as a user pastes them): the run works, nothing written shows them
    uri = f"s3://{BUCKET}/keys.lance"
    rc, err, out = m3(env, "ask", uri, "who grows tomatoes?", "-o", d / "a.jsonl")
    assert rc == 0, err
    text = (d / "a.jsonl").read_text()
    assert SECRET not in text
    forged = text.replace(f'"{uri}"', f'"s3://AK:{SECRET}@{BUCKET}/keys.lance"')
    (d / "b.jsonl").write_text(forged)  # an answer file written by an older m3
    rc, err, _ = m3(env, "report", uri, "-a", d / "b.jsonl", "-o", d / "page.html")
    assert rc == 0, err
    assert SECRET not in (d / "page.html").read_text()


@pytest.mark.slow
def test_batch_into_a_broken_object_store_stops_with_one_line(store, tmp_path):
    """No bucket or no credentials: no video can land, so the batch stops at the first commit with one
    line (not a failure per video, not a traceback); the same videos then batch into the real bucket."""
    from conftest import HAMILTON
    from support.clips import cut_pieces

    d, env = store
    pieces = cut_pieces(HAMILTON, 2, 2.5, tmp_path)
    for uri, drop, says in [
        ("s3://no-such-bucket/b.lance", (), "bucket does not exist"),
        (f"s3://{BUCKET}/b.lance", NO_KEYS, "AWS_ACCESS_KEY_ID"),
    ]:
        rc, err, _ = m3(env, "batch", *pieces, "-o", uri, "--faces-fps", "2", drop=drop)
        assert rc == 1 and len(err) == 1, err
        assert err[0].startswith(f"m3: error: {uri}: ") and says in err[0], err
    rc, err, _ = m3(env, "batch", *pieces, "-o", f"s3://{BUCKET}/b.lance", "--faces-fps", "2")
    assert rc == 0 and err[-1].startswith(f"m3: batch: memory s3://{BUCKET}/b.lance: 2 videos, "), err
