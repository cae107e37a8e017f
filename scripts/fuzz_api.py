"""Fuzz a real ``sparsescope serve`` (tiny random model, 127.0.0.1) with the schemathesis CLI.

    python scripts/fuzz_api.py                       # every check, 15 examples per operation
    python scripts/fuzz_api.py -- -n 100 --seed 7    # anything after -- goes to `schemathesis run`

The server is started as bench/bench_load.py starts it (the real CLI, uvicorn, its own data
directory) with the per-client rate limits off (the fuzzer is one client sending thousands of
requests) and no start-up warm-up; schemathesis reads its ``/openapi.json`` and runs every check
(``-c all``: ST202 "schema-valid request rejected" included). Its exit
status is this script's. Figures: docs/api.md, "The OpenAPI schema".
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))

from bench_load import live_server  # noqa: E402

DEFAULT_ARGS = ["-c", "all", "-n", "15", "--seed", "20260101", "--generation-deterministic"]


def main() -> int:
    extra = sys.argv[sys.argv.index("--") + 1 :] if "--" in sys.argv else []
    cli = shutil.which("schemathesis") or shutil.which("st")
    if cli is None:
        print("fuzz_api: schemathesis is not installed (pip install schemathesis)", file=sys.stderr)
        return 2
    env = {
        "SPARSESCOPE_RATE_PER_S": "0",
        "SPARSESCOPE_SHARE_RATE_PER_S": "0",
        "SPARSESCOPE_WARMUP": "0",
    }
    with tempfile.TemporaryDirectory() as tmp:
        with live_server(Path(tmp), tiny=True, env=env, start_timeout=600) as server:
            cmd = [cli, "run", f"{server.url}/openapi.json", *DEFAULT_ARGS, *extra]
            print(" ".join(cmd), f"(load average {os.getloadavg()[0]:.1f})", flush=True)
            return subprocess.call(cmd)


if __name__ == "__main__":
    sys.exit(main())
