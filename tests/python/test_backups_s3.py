"""Backups to S3-compatible object storage (`hayate backup --to s3://BUCKET/PREFIX`, `hayate
restore --from s3://BUCKET/PREFIX/TAG`), against a real S3 server: moto's, in a process of its
own on a loopback address, reached by the nodes through the standard AWS environment variables.

A 3-node cluster writes a full backup and then an incremental one of its keyspace into a bucket;
another 3-node cluster loads the incremental one (which brings its base with it) and every row
reads back at ALL as it was at the second backup. One object with a flipped byte is refused with
its key named and nothing of the backup loaded; a bucket that does not exist is refused with a
clear message, and the nodes go on serving. (test_backups.py covers the same through a
directory, 3 nodes into 5 with another replication factor.)
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator

import boto3
import pytest
from cassandra import ConsistencyLevel

from hayate_node import free_port
from test_backups import ADDED, CHANGED, DELETED, ROWS, records_written, restore_and_check
from topology import (KEYSPACE, TABLE, create_table, hayate, hayate_ok, load, on, output, scan,
                      topology_cluster)

BUCKET = "hayate-backups"
PREFIX = "nightly/c1"
# How long moto may take to start answering.
MOTO_START_TIMEOUT_S = 30
CREDENTIALS = {"AWS_ACCESS_KEY_ID": "hayate-test", "AWS_SECRET_ACCESS_KEY": "hayate-test-secret",
               "AWS_REGION": "us-east-1"}


@pytest.fixture
def s3(tmp_path, monkeypatch) -> Iterator[object]:
    """A moto S3 server of this test's own, and a boto3 client of it; the nodes started during
    the test find it through AWS_ENDPOINT_URL and the credentials in their environment."""
    if os.environ.get("HAYATE_REFERENCE"):
        pytest.skip("starts its own hayate cluster (HAYATE_REFERENCE is set)")
    host, port = "127.0.0.1", free_port()
    endpoint = f"http://{host}:{port}"
    log = open(tmp_path / "moto.log", "w")
    server = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", host, "-p", str(port)],
                              stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + MOTO_START_TIMEOUT_S
        while True:
            try:
                socket.create_connection((host, port), timeout=1).close()
                break
            except OSError:
                if server.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"moto did not start: {(tmp_path / 'moto.log').read_text()}")
                time.sleep(0.1)
        for name, value in {**CREDENTIALS, "AWS_ENDPOINT_URL": endpoint}.items():
            monkeypatch.setenv(name, value)
        client = boto3.client("s3", endpoint_url=endpoint, region_name=CREDENTIALS["AWS_REGION"],
                              aws_access_key_id=CREDENTIALS["AWS_ACCESS_KEY_ID"],
                              aws_secret_access_key=CREDENTIALS["AWS_SECRET_ACCESS_KEY"])
        client.create_bucket(Bucket=BUCKET)
        yield client
    finally:
        server.terminate()
        server.wait(timeout=10)
        log.close()


def keys(s3, prefix: str) -> list[str]:
    pages = s3.get_paginator("list_objects_v2").paginate(Bucket=BUCKET, Prefix=prefix)
    return sorted(o["Key"] for page in pages for o in page.get("Contents", []))


def copy_prefix(s3, source: str, target: str) -> None:
    for key in keys(s3, source + "/"):
        s3.copy_object(Bucket=BUCKET, Key=target + key[len(source):], CopySource={"Bucket": BUCKET, "Key": key})


def test_a_backup_to_s3_loads_into_another_cluster_and_a_damaged_one_loads_nothing(s3):
    location = f"s3://{BUCKET}/{PREFIX}"
    with topology_cluster("s3_backup_source", spare=0, write_block_size="128KiB") as source:
        source.start()
        session = source.session()
        create_table(session)
        load(session, range(ROWS))
        for k in DELETED:
            session.execute(f"DELETE FROM {TABLE} WHERE k = {k}")
        node1 = on(source.node(1))

        missing = hayate("backup", "--to", "s3://no-such-bucket/x", "-t", "full", KEYSPACE, *node1)
        assert missing.returncode != 0, output(missing)
        assert "no such bucket" in missing.stderr and "s3://no-such-bucket" in missing.stderr, output(missing)

        full = hayate_ok("backup", "--to", location, "-t", "full", KEYSPACE, "--all-nodes", *node1)
        assert full.count("backup full of 1 tables") == 3, full
        assert f"backup written to {location}/full" in full, full
        written = keys(s3, PREFIX + "/full/")
        assert len(written) == 6 and all(k.endswith(("/manifest.json", "/topo.t.hyb")) for k in written), written

        changed = session.prepare(f"UPDATE {TABLE} SET v = ? WHERE k = ?")
        for k in CHANGED:
            session.execute(changed, (f"changed {k}", k))
        load(session, ADDED)
        incremental = hayate_ok("backup", "--to", location, "-t", "incr", "--incremental", KEYSPACE,
                             "--all-nodes", *node1)
        assert incremental.count("(incremental over full)") == 3, incremental
        assert records_written(incremental) < records_written(full) / 2, (
            f"the incremental backup wrote nearly as much as the full one:\n{full}\n{incremental}")
        expected = scan(session, ConsistencyLevel.ALL, TABLE)
        assert len(expected) == ROWS - len(DELETED) + len(ADDED)
        source.check_alive()

    with topology_cluster("s3_backup_target", spare=0) as target:
        target.start()
        session = target.session()
        node1 = on(target.node(1))

        # A copy of the backup with one flipped byte in one object of its base: refused by the
        # object's key, and nothing of it loaded (not even its table created).
        damaged = "damaged/c1"
        copy_prefix(s3, PREFIX, damaged)
        victim = keys(s3, damaged + "/full/")[1]
        assert victim.endswith("/topo.t.hyb"), victim
        data = bytearray(s3.get_object(Bucket=BUCKET, Key=victim)["Body"].read())
        data[len(data) // 2] ^= 0x01
        s3.put_object(Bucket=BUCKET, Key=victim, Body=bytes(data))
        result = hayate("restore", "--from", f"s3://{BUCKET}/{damaged}/incr", *node1)
        assert result.returncode != 0, output(result)
        assert f"s3://{BUCKET}/{victim}" in result.stderr and "nothing was restored" in result.stderr, output(result)
        assert not list(session.execute(
            "SELECT keyspace_name FROM system_schema.keyspaces WHERE keyspace_name = %s", (KEYSPACE,))), (
            "a damaged backup created its keyspace")

        missing = hayate("restore", "--from", "s3://no-such-bucket/x/incr", *node1)
        assert missing.returncode != 0 and "no such bucket" in missing.stderr, output(missing)

        restore_and_check(target, session, f"{location}/incr", expected)
