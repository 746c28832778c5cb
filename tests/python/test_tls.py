"""The SDK over TLS: evoscaled with --tls-cert/--tls-key (certificates made here by the openssl
command); Client(tls_ca=...) connects, a client without the CA (or with another CA) fails with
UnavailableError, and a token rides inside the TLS channel."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

import evoscale


def make_certificates(folder: Path) -> None:
    """A CA, a server certificate for 127.0.0.1 signed by it, and an unrelated CA."""

    def run(*args: str) -> None:
        subprocess.run(["openssl", *args], cwd=folder, check=True, capture_output=True)

    for ca in ("ca", "other-ca"):
        run("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", f"/CN={ca}",
            "-keyout", f"{ca}.key", "-out", f"{ca}.pem")
    run("req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=localhost", "-keyout",
        "server.key", "-out", "server.csr")
    (folder / "server.ext").write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\n")
    run("x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
        "-CAcreateserial", "-days", "2", "-extfile", "server.ext", "-out", "server.pem")


@pytest.fixture(scope="module")
def tls_server(start_evoscaled, tmp_path_factory):
    certs = tmp_path_factory.mktemp("certs")
    make_certificates(certs)
    tokens = certs / "tokens"
    tokens.write_text("writer-0123456789abcdef writer\n")
    server = start_evoscaled("--tls-cert", str(certs / "server.pem"), "--tls-key",
                             str(certs / "server.key"), "--auth-tokens", str(tokens))
    return server, certs


def test_client_with_the_ca_works_and_without_it_fails(tls_server, display_name):
    server, certs = tls_server
    spec = {"metrics": [{"name": "loss", "goal": "MINIMIZE"}],
            "parameters": [{"name": "x", "double_spec": {"min": 0, "max": 1}}],
            "algorithm": {"algorithm": "RANDOM"}}
    with evoscale.Client(server.address, token="writer-0123456789abcdef",
                         tls_ca=certs / "ca.pem", timeout=10) as client:
        study = client.create_study(display_name, spec)
        [trial] = study.ask()
        study.tell(trial, 0.5)
        assert study.trials[0].state == "SUCCEEDED"
    for ca in (None, certs / "other-ca.pem"):
        with evoscale.Client(server.address, token="writer-0123456789abcdef", tls_ca=ca,
                             timeout=10) as client:
            with pytest.raises(evoscale.UnavailableError):
                client.list_studies()
    # Over TLS, the token is still checked.
    with evoscale.Client(server.address, tls_ca=certs / "ca.pem", timeout=10) as client:
        with pytest.raises(evoscale.UnauthenticatedError):
            client.list_studies()
