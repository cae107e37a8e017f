"""Fuzz a real ``sparsescope serve`` (tiny random model, 127.0.0.1) with the schemathesis CLI.

    python scripts/fuzz_api.py                       # every check, 15 examples per operation
    python scripts/fuzz_api.py -- -n 100 --seed 7    # anything after -- goes to `schemathesis run`

The server is started as bench/bench_load.py starts it (the real CLI, uvicorn, its own data
directory) with the per-client rate limits off (the fuzzer is one client sending thousands of
requests) and no start-up warm-up; schemathesis reads its ``/openapi.json`` and runs every check
(``-c all``: ST202 "schema-valid request rejected" included), plus
``scripts/fuzz_hooks.py``'s check that no body shows a trace. At the end it prints the responses
by status and the tracebacks in the server's log (both must be 0 for 5xx). Its exit status is
schemathesis', or 1 when the server's log holds a traceback. Figures: docs/api.md, "The OpenAPI
schema".
"""

from __future__ import annotations

import json
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
        statuses = Path(tmp) / "statuses.json"
        run_env = {
            **os.environ,
            "SCHEMATHESIS_HOOKS": "fuzz_hooks",
            "PYTHONPATH": str(Path(__file__).resolve().parent)
            + os.pathsep
            + os.environ.get("PYTHONPATH", ""),
            "FUZZ_STATUS_FILE": str(statuses),
        }
        with live_server(Path(tmp), tiny=True, env=env, start_timeout=600) as server:
            cmd = [cli, "run", f"{server.url}/openapi.json", *DEFAULT_ARGS, *extra]
            print(" ".join(cmd), f"(load average {os.getloadavg()[0]:.1f})", flush=True)
            code = subprocess.call(cmd, env=run_env)
            log = server.log_path.read_text(errors="replace")
        counts = json.loads(statuses.read_text()) if statuses.exists() else {}
        total = sum(counts.values())
        server_errors = sum(v for k, v in counts.items() if int(k) >= 500)
        traces = log.count("Traceback")
        print(f"fuzz_api: {total} responses by status {counts}; 5xx: {server_errors}")
        print(f"fuzz_api: tracebacks in the server's log: {traces}")
        if traces:
            i = log.index("Traceback")
            print(log[max(0, i - 500) : i + 3000], file=sys.stderr)
        return code or (1 if traces or server_errors else 0)


if __name__ == "__main__":
    sys.exit(main())
