"""The Python client over several evoscaled replicas on one PostgreSQL database (issue 30).

A throwaway PostgreSQL server (Debian's binaries; initdb as the postgres user when root, in a
temporary folder, on a free port) holds the studies; two evoscaled replicas serve them. The
client is given both addresses: it keeps to the first live one and, when that one is killed,
moves to the other, which takes the dead replica's studies over. Skipped, saying why, where
PostgreSQL is not installed.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

import evoscale
from conftest import Evoscaled


def _postgres_bin() -> Path | None:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/postgres"))
    return Path(found[-1]).parent if found else None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def postgres_uri() -> Iterator[str]:
    bin_dir = _postgres_bin()
    if bin_dir is None:
        pytest.skip("PostgreSQL is not installed (no /usr/lib/postgresql/*/bin/postgres)")
    root = os.geteuid() == 0
    as_user: list[str] = []
    if root:
        try:
            pwd.getpwnam("postgres")
        except KeyError:
            pytest.skip("running as root, and there is no postgres user to run the server as")
        as_user = ["runuser", "-u", "postgres", "--"]
    # A folder of its own under the system's temporary folder, which the postgres user can reach
    # (pytest's own may sit below folders only this user can enter).
    work = Path(tempfile.mkdtemp(prefix="evoscale-pg-"))
    data, sockets = work / "data", work / "sockets"
    sockets.mkdir()
    if root:
        shutil.chown(work, "postgres")
        shutil.chown(sockets, "postgres")
    initdb = subprocess.run(
        [*as_user, str(bin_dir / "initdb"), "-D", str(data), "-U", "postgres", "-A", "trust"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
    )
    assert initdb.returncode == 0, initdb.stdout.decode(errors="replace")
    port = _free_port()
    log = open(work / "postgres.log", "wb")
    server = subprocess.Popen(
        [*as_user, str(bin_dir / "postgres"), "-D", str(data), "-p", str(port),
         "-c", "listen_addresses=127.0.0.1", "-c", f"unix_socket_directories={sockets}",
         "-c", "fsync=off"],
        stdout=log, stderr=subprocess.STDOUT,
    )
    deadline = time.monotonic() + 60
    while subprocess.run(
        [str(bin_dir / "pg_isready"), "-h", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
    ).returncode != 0:
        assert server.poll() is None, (work / "postgres.log").read_text(errors="replace")
        assert time.monotonic() < deadline, "PostgreSQL did not start in 60 s"
        time.sleep(0.1)
    yield f"postgresql://postgres@127.0.0.1:{port}/postgres"
    # runuser does not pass signals on: pg_ctl stops the server itself (a fast shutdown).
    subprocess.run(
        [*as_user, str(bin_dir / "pg_ctl"), "-D", str(data), "-m", "fast", "-w", "stop"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    server.wait(timeout=30)
    log.close()
    shutil.rmtree(work, ignore_errors=True)


@pytest.fixture
def replicas(
    postgres_uri: str, tmp_path: Path
) -> Iterator[Callable[[str], Evoscaled]]:
    started: list[Evoscaled] = []

    def start(name: str) -> Evoscaled:
        workdir = tmp_path / name
        workdir.mkdir()
        replica = Evoscaled(
            workdir,
            ["--lease-seconds", "1", "--telemetry-db", str(workdir / "telemetry.db")],
            db=postgres_uri,
        )
        started.append(replica)
        return replica

    yield start
    for replica in started:
        replica.stop()


def test_a_client_of_two_replicas_moves_to_the_live_one(
    replicas: Callable[[str], Evoscaled], display_name: str
) -> None:
    a, b = replicas("a"), replicas("b")
    spec = {
        "metrics": [{"name": "loss", "goal": "MINIMIZE"}],
        "parameters": [{"name": "x", "double_spec": {"min": 0.0, "max": 1.0}}],
        "algorithm": {"algorithm": "RANDOM", "seed": 3},
    }
    with evoscale.Client([a.address, b.address], client_id="worker-1", timeout=30) as client:
        study = client.create_study(display_name, spec)
        first = study.ask(2)
        study.tell(first[0], {"loss": 0.5})
        a.process.kill()  # the replica the client talks to, and owner of the study
        a.process.wait()
        # The same client on the other replica: its other trial is still its own, and what
        # it tells lands.
        again = study.ask(1)
        assert [t.id for t in again] == [first[1].id]
        study.tell(again[0], {"loss": 0.25})
        assert sorted(t.id for t in study.trials) == [1, 2]
        assert [t.id for t in study.best_trials] == [2]
    with evoscale.Client(f"{b.address},{a.address}") as other:
        assert other.create_study(display_name, spec).name == study.name


def test_a_list_of_replicas_must_be_ip_addresses() -> None:
    with pytest.raises(ValueError, match="must be IP:PORT"):
        evoscale.Client("replica-a:50051,replica-b:50051")
