"""remex.farm(): a session on a device leased from a farm in a real Redis, held while the
session lives and released when it closes."""
import shutil
import subprocess
import time

import numpy as np
import pytest

import remex
from conftest import CLI_BIN, Server, free_port


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


def test_jobs_outlive_their_client(redis_url, models):
    """A job queued from Python is run by a `remex worker` process and read back by its id:
    its state, times, result and log; a queued job is cancelled."""
    server = Server("--farm", redis_url, "--pool", "pyjobs")
    worker = None
    try:
        dropped = remex.submit_job(models["add_relu"], farm=redis_url, pool="pyjobs", command="run")
        assert dropped == "pyjobs/1"
        assert remex.job_status(dropped, farm=redis_url)["state"] == "queued"
        remex.cancel_job(dropped, farm=redis_url)
        assert remex.job_status(dropped, farm=redis_url)["state"] == "cancelled"
        with pytest.raises(remex.FailedPrecondition):
            remex.cancel_job(dropped, farm=redis_url)
        worker = subprocess.Popen([CLI_BIN, "worker", "--farm", redis_url, "--pool", "pyjobs", "--name", "py-worker",
                                   "--heartbeat", "0.5"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        job_id = remex.submit_job(models["add_relu"], farm=redis_url, pool="pyjobs", command="run", priority=5)
        job = remex.wait_job(job_id, farm=redis_url, timeout=60)
        assert job["state"] == "succeeded", job
        assert job["worker"] == "py-worker" and job["attempts"] == 1 and job["exit_code"] == 0
        assert job["queue_ms"] >= 0 and job["run_ms"] >= 0
        assert isinstance(job["result"], dict)
        assert any(line.startswith("remex: attempt 1 on worker py-worker") for line in remex.job_logs(job_id, farm=redis_url))
        assert [j["id"] for j in remex.jobs(farm=redis_url, pool="pyjobs")] == [job_id, dropped]
        with pytest.raises(remex.NotFound):
            remex.job_status("pyjobs/99", farm=redis_url)
        with pytest.raises(remex.InvalidArgument, match="priority"):
            remex.submit_job(models["add_relu"], farm=redis_url, pool="pyjobs", priority=5000)
    finally:
        if worker:
            worker.terminate()
            worker.wait()
        server.stop()
