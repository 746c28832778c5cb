"""Fixtures: the real evoscaled as a child process on port 0 with a temporary database.

The binary is $EVOSCALED (ctest sets it), else build/bin/evoscaled of this checkout. Run with
the interpreter that has the evoscale package installed, e.g. (from the repository root):

    /usr/bin/python3 -m venv --system-site-packages /tmp/evoscale-venv
    /tmp/evoscale-venv/bin/pip install --no-build-isolation --no-index ./clients/python
    /tmp/evoscale-venv/bin/python -m pytest tests/python
"""

from __future__ import annotations

import json
import os
import queue
import subprocess
import threading
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

import evoscale

ROOT = Path(__file__).resolve().parents[2]
START_TIMEOUT_S = 30


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "server_v3: needs the server's wave-3 API (get-or-create CreateStudy, "
        "ListStudies.display_name, STOPPED trials, UpdateMetadata, DeleteTrial); "
        'deselect with -m "not server_v3" against an older evoscaled',
    )


def evoscaled_path() -> Path:
    path = Path(os.environ.get("EVOSCALED", ROOT / "build" / "bin" / "evoscaled"))
    if not os.access(path, os.X_OK):
        pytest.fail(f"evoscaled not found at {path}: scripts/dev.sh build, or set EVOSCALED")
    return path


class Evoscaled:
    """One evoscaled child process; `address` is its gRPC host:port."""

    def __init__(self, workdir: Path, extra_args: list[str], db: str | None = None) -> None:
        self.workdir = workdir
        self.stderr_path = workdir / "evoscaled.err"
        command = [
            str(evoscaled_path()),
            "--db", db or str(workdir / "x.db"),
            "--grpc", "127.0.0.1:0",
            "--http", "127.0.0.1:0",
            *extra_args,
        ]
        with open(self.stderr_path, "wb") as stderr:
            self.process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=stderr)
        # A thread drains stdout, so evoscaled never blocks on a full pipe.
        lines: queue.Queue[bytes] = queue.Queue()
        threading.Thread(target=self._drain, args=(lines,), daemon=True).start()
        self.address, self.http = self._wait_listening(lines)

    def _drain(self, lines: queue.Queue[bytes]) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            lines.put(line)
        lines.put(b"")

    def _wait_listening(self, lines: queue.Queue[bytes]) -> tuple[str, str]:
        while True:
            try:
                line = lines.get(timeout=START_TIMEOUT_S)
            except queue.Empty:
                line = b""
            if not line:
                self.stop()
                raise RuntimeError(
                    f"evoscaled did not report listening within {START_TIMEOUT_S} s:\n"
                    + self.stderr_path.read_text(errors="replace")
                )
            if b"listening" in line:
                event = json.loads(line)
                return event["grpc"], event["http"]

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


@pytest.fixture(scope="session")
def start_evoscaled(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Callable[..., Evoscaled]]:
    """Starts an evoscaled with extra flags; every one started is stopped at the end."""
    started: list[Evoscaled] = []

    def start(*extra_args: str) -> Evoscaled:
        server = Evoscaled(tmp_path_factory.mktemp("evoscaled"), list(extra_args))
        started.append(server)
        return server

    yield start
    for server in started:
        server.stop()


@pytest.fixture(scope="session")
def evoscaled(start_evoscaled: Callable[..., Evoscaled]) -> Evoscaled:
    """The evoscaled the tests of one pytest run share (each test uses studies of its own)."""
    return start_evoscaled()


@pytest.fixture
def client(evoscaled: Evoscaled) -> Iterator[evoscale.Client]:
    with evoscale.Client(evoscaled.address) as c:
        yield c


@pytest.fixture
def display_name(request: pytest.FixtureRequest) -> str:
    """A display name no other test uses."""
    return f"{request.node.name}-{uuid.uuid4().hex[:8]}"
