"""remex.farm(): a session on a device leased from a farm in a real Redis, held while the
session lives and released when it closes."""
import shutil
import subprocess
import time

import numpy as np
import pytest

import remex
from conftest import Server, free_port


@pytest.fixture
def redis_url():
    binary = shutil.which("redis-server")
    assert binary, "redis-server is not installed (scripts/setup-deps.sh --tests installs it)"
    port = free_port()
    proc = subprocess.Popen([binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"redis://127.0.0.1:{port}"
    deadline = time.monotonic() + 10
    while subprocess.run(["redis-cli", "-p", str(port), "ping"], capture_output=True).returncode != 0:
        assert time.monotonic() < deadline and proc.poll() is None, "redis-server did not start"
        time.sleep(0.05)
    yield url
    proc.terminate()
    proc.wait()


def test_farm_session_holds_its_lease_until_closed(redis_url, models):
    server = Server("--farm", redis_url, "--pool", "py")  # registered once it prints its address
    try:
        with remex.farm(redis_url, pool="py", wait=5) as s:
            assert s.server == server.address + " (leased from pool py)"
            m = s.load(models["add_relu"])
            np.testing.assert_allclose(m.run({"x": np.zeros((2, 3), np.float32)})["y"], [[0.5, 0, 2]] * 2)
            # The only device is leased: another client finds none free in time.
            with pytest.raises(remex.DeadlineExceeded):
                remex.farm(redis_url, pool="py", wait=0.2)
            # A leased server refuses a session without the lease's token.
            with pytest.raises(remex.PermissionDenied):
                remex.connect(server.address)
        # Closed: the lease is released, and the next client gets the device.
        with remex.farm(redis_url, pool="py", wait=5) as again:
            assert again.info()["name"] == "remex-server"
        with pytest.raises(remex.NotFound):
            remex.farm(redis_url, pool="py", labels="gpu=h100")
        with pytest.raises(remex.InvalidArgument):
            remex.farm("http://not-redis", pool="py")
    finally:
        server.stop()
