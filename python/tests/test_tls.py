"""remex.connect over TLS against real remex-server processes with the test PKI of
tests/data/tls: a verified server, a server name given apart from the address, a CA
that did not sign the server's certificate, plaintext on either side, mutual TLS with
and without a client certificate, and arguments or files that cannot be used."""
import pathlib

import numpy as np
import pytest

import remex
from conftest import pki


def runs_add_relu(session, models):
    m = session.load(models["add_relu"])
    x = np.array([[1, -2, 3], [-4, 5, -6]], np.float32)
    np.testing.assert_allclose(m.run({"x": x})["y"], np.maximum(x + [[0.5, -1.0, 2.0]], 0))


def test_a_model_runs_over_tls(tls_server, models):
    with remex.connect(tls_server.address, tls_ca=pki("ca.pem"), timeout=60) as s:
        runs_add_relu(s, models)
        # 4 MiB each way through TLS records, intact.
        a = np.random.default_rng(3).standard_normal((1024, 1024)).astype(np.float32)
        np.testing.assert_array_equal(s.upload(a).numpy(), a)
    # Paths as pathlib objects, and the certificate checked against a name given apart
    # from the address connected to (as through a tunnel).
    with remex.connect(tls_server.address, tls_ca=pathlib.Path(pki("ca.pem")), tls_server_name="localhost") as s:
        assert s.info()["name"] == "remex-server"


def test_a_server_certificate_the_ca_did_not_sign_is_refused(tls_server):
    with pytest.raises(remex.Unavailable, match="certificate verify failed"):
        remex.connect(tls_server.address, tls_ca=pki("other-ca.pem"))
    with pytest.raises(remex.Unavailable, match="mismatch"):
        remex.connect(tls_server.address, tls_ca=pki("ca.pem"), tls_server_name="elsewhere.example")


def test_plaintext_and_tls_do_not_mix(tls_server, server):
    with pytest.raises(remex.FailedPrecondition, match="accepts TLS connections only"):
        remex.connect(tls_server.address)
    with pytest.raises(remex.Unavailable, match="TLS handshake"):
        remex.connect(server.address, tls_ca=pki("ca.pem"))


def test_mutual_tls_serves_clients_with_a_certificate_of_its_ca(mtls_server, models):
    # Without a client certificate the server ends the handshake (under TLS 1.3 the
    # client learns it at hello, the first request, which connect makes).
    with pytest.raises(remex.Unavailable):
        remex.connect(mtls_server.address, tls_ca=pki("ca.pem"))
    # The server's own certificate is not one for a client (extendedKeyUsage serverAuth).
    with pytest.raises(remex.Unavailable):
        remex.connect(mtls_server.address, tls_ca=pki("ca.pem"), tls_cert=pki("server.pem"), tls_key=pki("server.key"))
    with remex.connect(mtls_server.address, tls_ca=pki("ca.pem"), tls_cert=pki("client.pem"),
                       tls_key=pki("client.key"), timeout=60) as s:
        runs_add_relu(s, models)


def test_tls_arguments_and_files_that_cannot_be_used(tls_server, tmp_path):
    with pytest.raises(remex.InvalidArgument, match="need tls_ca"):
        remex.connect(tls_server.address, tls_cert=pki("client.pem"), tls_key=pki("client.key"))
    with pytest.raises(remex.InvalidArgument, match="need tls_ca"):
        remex.connect(tls_server.address, tls_server_name="localhost")
    with pytest.raises(remex.InvalidArgument, match="tls_cert and tls_key go together"):
        remex.connect(tls_server.address, tls_ca=pki("ca.pem"), tls_cert=pki("client.pem"))
    missing = str(tmp_path / "missing-ca.pem")
    with pytest.raises(remex.InvalidArgument, match="missing-ca.pem': cannot be read: No such file"):
        remex.connect(tls_server.address, tls_ca=missing)
    not_pem = tmp_path / "not-a-certificate.pem"
    not_pem.write_text("hello\n")
    with pytest.raises(remex.InvalidArgument, match="not-a-certificate.pem"):
        remex.connect(tls_server.address, tls_ca=not_pem)
    with pytest.raises(remex.InvalidArgument, match="cannot be used with certificate"):
        remex.connect(tls_server.address, tls_ca=pki("ca.pem"), tls_cert=pki("client.pem"), tls_key=pki("server.key"))
