"""The Connect tier: a real Spark Connect server, started from this line's pyspark with
eqdelete (``eqdelete.connect.server_command``) on a free local port, and stopped after.

It runs in a pytest process of its own (``scripts/test.sh`` does so; the root conftest leaves
this folder out unless it is named): once a process holds a Connect session, pyspark builds
Connect columns everywhere, so classic sessions cannot share it.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

import eqdelete
from eqdelete.connect import server_command

HERE = Path(__file__).resolve().parent


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="session")
def warehouse(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("connect-warehouse")


@pytest.fixture(scope="session")
def server(warehouse: Path, tmp_path_factory: pytest.TempPathFactory):
    """The server's URL; its log is in the tmp folder and shown if it fails to start."""
    port = _free_port()
    log_path = tmp_path_factory.mktemp("connect-server") / "server.log"
    command = server_command(port=port, master="local[2]", warehouse=warehouse, driver_memory="2g", conf={
        "spark.ui.enabled": "false", "spark.sql.shuffle.partitions": "4", "spark.sql.session.timeZone": "UTC",
        "spark.sql.warehouse.dir": (warehouse / "spark-warehouse").as_uri(),
    })
    with open(log_path, "wb") as log:
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    url = f"sc://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 180
        while True:
            if process.poll() is not None:
                pytest.fail(f"the Connect server exited with {process.returncode}:\n{log_path.read_text()[-4000:]}")
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=1):
                    break
            except OSError:
                if time.monotonic() > deadline:
                    pytest.fail(f"the Connect server did not listen on {port} in 180 s:\n{log_path.read_text()[-4000:]}")
                time.sleep(1)
        yield url
    finally:
        os.killpg(process.pid, 15)
        try:
            process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, 9)


@pytest.fixture(scope="session")
def spark(server: str):
    session = eqdelete.session(conf={"spark.remote": server})
    yield session
    session.stop()


@pytest.fixture(scope="session")
def python() -> str:
    return sys.executable
