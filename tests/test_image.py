"""The container image, built and run for real.

``scripts/image.sh build`` builds the image: with docker where one answers ``docker info``,
otherwise with buildah on a Debian bookworm base made by mmdebstrap when no registry is reachable.
The test then serves it and checks ``/healthz``, one analysis by the real model, that the server
process is not root, and that a share made in one container is served by a second container on
the same data volume (a host folder mounted at ``/data``).

``podman run`` cannot start containers on every host (crun fails to set RLIMIT_NOFILE in some
sandboxes), so with buildah a container is ``buildah from`` + ``buildah run --isolation chroot
--network host``: the image's filesystem, user, environment and working folder, the host's network.

One test function on purpose: the steps share one build and run in order, and pytest-xdist must not
hand them to two workers that would build and serve at once.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "image.sh"
IMAGE = "localhost/sparsescope:test"
UID = 10001
BUILD_TIMEOUT = 3600  # a cold build on a loaded 2-core machine: torch, transformers, spaCy
START_TIMEOUT = 600  # model load on that machine

pytestmark = [pytest.mark.image, pytest.mark.slow, pytest.mark.real_model]


def _works(*argv: str) -> bool:
    try:
        return subprocess.run(argv, capture_output=True, timeout=60).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def container_engine() -> str | None:
    """What scripts/image.sh will use: a working docker, else buildah (as root, with mmdebstrap
    to make a base when no registry is reachable); None when neither is usable here."""
    if shutil.which("docker") and _works("docker", "info"):
        return "docker"
    if shutil.which("buildah") and shutil.which("mmdebstrap") and os.geteuid() == 0:
        return "buildah"
    return None


def storage_driver() -> str:
    """The buildah storage driver scripts/image.sh picks (overlay where it mounts, else vfs)."""
    out = subprocess.run(
        ["bash", str(SCRIPT), "info"], check=True, capture_output=True, text=True, timeout=120
    ).stdout
    return dict(item.split("=", 1) for item in out.split())["storage_driver"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def http(method: str, url: str, body: dict | None = None, timeout: float = 600) -> tuple[int, str]:
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, method=method)
    if data is not None:
        req.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(req, timeout=timeout) as res:
            return res.status, res.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


class Container:
    """One container of the image serving on 127.0.0.1:port, ``data`` mounted at /data."""

    def __init__(self, engine: str, data: Path, log: Path, driver: str = "overlay"):
        self.engine, self.data, self.log, self.driver = engine, data, log, driver
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.name = f"sparsescope-test-{os.getpid()}-{self.port}"
        self.ctr: str | None = None
        self.proc: subprocess.Popen | None = None

    def start(self) -> None:
        env = {"SPARSESCOPE_WARMUP": "false"}  # no gallery precomputation: only what is asked
        out = self.log.open("wb")
        if self.engine == "docker":
            argv = [
                "docker",
                "run",
                "--rm",
                "--name",
                self.name,
                "-p",
                f"127.0.0.1:{self.port}:8000",
            ]
            argv += ["-v", f"{self.data}:/data"]
            for k, v in env.items():
                argv += ["-e", f"{k}={v}"]
            self.proc = subprocess.Popen(
                [*argv, IMAGE], stdout=out, stderr=subprocess.STDOUT, start_new_session=True
            )
            return
        bah = ["buildah", "--storage-driver", self.driver]
        self.ctr = subprocess.run(
            [*bah, "from", "-q", "--name", self.name, IMAGE],
            check=True,
            capture_output=True,
            text=True,
            timeout=600,
        ).stdout.strip()
        # buildah run mounts an anonymous volume over the image's VOLUME /data, which would hide
        # the host folder: drop the declaration from this working container (not from the image)
        config = ["--volume", "/data-"]
        for k, v in env.items():
            config += ["--env", f"{k}={v}"]
        subprocess.run([*bah, "config", *config, self.ctr], check=True, timeout=60)
        # the image's CMD, on a free port of the host's network
        argv = [*bah, "run", "--isolation", "chroot", "--network", "host"]
        argv += ["-v", f"{self.data}:/data", self.ctr, "--"]
        argv += ["sparsescope", "serve", "--host", "127.0.0.1", "--port", str(self.port)]
        self.proc = subprocess.Popen(
            argv, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )

    def healthcheck(self) -> subprocess.CompletedProcess:
        """The image's own HEALTHCHECK command, run inside this container (with buildah, on the
        host's network: pointed at this container's port instead of 8000)."""
        if self.engine == "docker":
            fmt = "{{json .Config.Healthcheck.Test}}"
            test = json.loads(
                subprocess.run(
                    ["docker", "image", "inspect", "--format", fmt, IMAGE],
                    check=True,
                    capture_output=True,
                    text=True,
                    timeout=60,
                ).stdout
            )
            argv = ["docker", "exec", self.name, *test[1:]]
        else:
            bah = ["buildah", "--storage-driver", self.driver]
            config = json.loads(
                subprocess.run(
                    [*bah, "inspect", "--type", "image", IMAGE],
                    check=True,
                    capture_output=True,
                    text=True,
                    timeout=60,
                ).stdout
            )
            test = config["Docker"]["config"]["Healthcheck"]["Test"]
            assert test[0] == "CMD", test
            test = [arg.replace(":8000/", f":{self.port}/") for arg in test[1:]]
            argv = [
                *bah,
                "run",
                "--isolation",
                "chroot",
                "--network",
                "host",
                self.ctr,
                "--",
                *test,
            ]
        return subprocess.run(argv, capture_output=True, text=True, timeout=300)

    def logs(self) -> str:
        return self.log.read_text(errors="replace")[-4000:]

    def wait_healthy(self) -> dict:
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            assert self.proc is not None
            if self.proc.poll() is not None:
                pytest.fail(f"the container exited ({self.proc.returncode}):\n{self.logs()}")
            try:
                status, body = http("GET", self.url + "/healthz", timeout=10)
                if status == 200:
                    return json.loads(body)
            except OSError:
                pass
            time.sleep(2)
        pytest.fail(f"/healthz did not answer within {START_TIMEOUT} s:\n{self.logs()}")

    def server_status(self) -> dict[str, str]:
        """The server process's /proc/<pid>/status (Name, Uid, ...)."""
        if self.engine == "docker":
            text = subprocess.run(
                ["docker", "exec", self.name, "cat", "/proc/1/status"],
                check=True,
                capture_output=True,
                text=True,
                timeout=60,
            ).stdout
        else:
            text = Path(f"/proc/{self.server_pid()}/status").read_text()
        return dict(
            (k.strip(), v.strip())
            for k, _, v in (line.partition(":") for line in text.splitlines())
        )

    def server_pid(self) -> int:
        """With buildah: the process under ``buildah run`` that serves on our port."""
        assert self.proc is not None
        children: dict[int, list[int]] = {}
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit():
                try:
                    ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
                except (OSError, IndexError, ValueError):
                    continue
                children.setdefault(ppid, []).append(int(entry.name))
        todo, found = [self.proc.pid], []
        while todo:
            pid = todo.pop()
            try:
                argv = (Path(f"/proc/{pid}/cmdline").read_bytes()).split(b"\0")
            except OSError:
                continue
            if b"serve" in argv and str(self.port).encode() in argv and pid != self.proc.pid:
                found.append(pid)
            todo.extend(children.get(pid, []))
        assert found, f"no server process under buildah run ({self.proc.pid})"
        return found[-1]  # the deepest: the server itself, not a wrapper

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            pids = []
            if self.engine == "buildah":
                try:
                    pids = [self.server_pid()]
                except AssertionError:
                    pass
            if self.engine == "docker":
                subprocess.run(
                    ["docker", "stop", "-t", "20", self.name], capture_output=True, timeout=120
                )
            else:
                os.killpg(self.proc.pid, signal.SIGTERM)
                for pid in pids:  # chroot'ed server in a session of its own
                    try:
                        os.kill(pid, signal.SIGTERM)
                    except ProcessLookupError:
                        pass
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=60)
        if self.ctr:
            subprocess.run(
                ["buildah", "--storage-driver", self.driver, "rm", self.ctr],
                capture_output=True,
                timeout=600,
            )
            self.ctr = None


@pytest.fixture(scope="module")
def engine() -> str:
    found = container_engine()
    if found is None:
        pytest.skip(
            "no container engine: neither a working docker (docker info) nor, as root, buildah and "
            "mmdebstrap (apt-get install buildah podman mmdebstrap); .ci/run installs them"
        )
    return found


@pytest.fixture(scope="module")
def image(engine: str, tmp_path_factory) -> str:
    log = tmp_path_factory.mktemp("image") / "build.log"
    env = {**os.environ, "IMAGE": IMAGE}
    with log.open("wb") as out:
        res = subprocess.run(
            ["bash", str(SCRIPT), "build"],
            cwd=ROOT,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            timeout=BUILD_TIMEOUT,
        )
    if res.returncode != 0:
        pytest.fail(f"scripts/image.sh build failed ({res.returncode}):\n{log.read_text()[-4000:]}")
    return IMAGE


def test_the_image_serves_the_model_as_non_root_and_keeps_shares_on_its_volume(
    engine: str, image: str, tmp_path: Path
):
    data = tmp_path / "data"
    data.mkdir()
    if os.geteuid() == 0:
        os.chown(data, UID, UID)  # as a fresh docker volume would be: the image's user owns /data
    else:
        data.chmod(0o777)

    driver = storage_driver()
    first = Container(engine, data, tmp_path / "first.log", driver)
    try:
        first.start()
        health = first.wait_healthy()
        assert health.get("model"), health

        status, body = http(
            "POST", first.url + "/api/analyze", {"text": "The cat sat on the mat.", "alpha": 1.5}
        )
        assert status == 200, body
        analysis = json.loads(body)
        words = [t["text"] for t in analysis["tokens"]]
        assert "cat" in words and "[CLS]" in words, words
        assert analysis["layers"] == 6 and analysis["heads"] == 12, analysis["layers"]
        assert analysis["device"] == "cpu"

        check = first.healthcheck()
        assert check.returncode == 0, check.stdout + check.stderr

        proc = first.server_status()
        real_uid = int(proc["Uid"].split()[0])
        assert real_uid != 0 and real_uid == UID, f"the server runs as uid {proc['Uid']}"

        state = {"text": "Shares outlive their container.", "alpha": 1.5, "layer": 1, "head": 2}
        status, body = http("POST", first.url + "/api/share", {"state": state})
        assert status == 200, body
        share = json.loads(body)["id"]
    finally:
        first.stop()

    db = data / "shares.sqlite3"
    assert db.exists(), sorted(p.name for p in data.iterdir())
    assert db.stat().st_uid == UID or os.geteuid() != 0, "the database was not written by uid 10001"

    second = Container(engine, data, tmp_path / "second.log", driver)
    try:
        second.start()
        second.wait_healthy()
        status, body = http("GET", f"{second.url}/api/share/{share}")
        assert status == 200, body
        saved = json.loads(body)["state"]
        assert {k: saved[k] for k in state} == state, saved
        status, page = http("GET", f"{second.url}/s/{share}")
        assert status == 200 and "shared-state" in page, page[:500]
        status, _ = http("GET", f"{second.url}/api/share/AAAAAAAAAAAA")
        assert status == 404
    finally:
        second.stop()
