"""schemathesis hooks of ``scripts/fuzz_api.py`` (loaded through ``SCHEMATHESIS_HOOKS``).

One extra check, run on every response beside schemathesis' own: no body shows a trace or a path
of the server (``Traceback``, ``File "``, ``site-packages``). It also counts the responses by
status and writes the counts as JSON to ``FUZZ_STATUS_FILE`` when the run ends, so the script
can report how many 5xx (and of what) the whole run saw.
"""

from __future__ import annotations

import atexit
import json
import os
import re
from collections import Counter

import schemathesis

LEAKS = re.compile(r'Traceback|File "|site-packages')
STATUSES: Counter[int] = Counter()


@schemathesis.check
def no_trace_in_body(ctx, response, case) -> None:
    STATUSES[response.status_code] += 1
    text = response.content.decode("utf-8", "replace") if response.content else ""
    if LEAKS.search(text):
        raise AssertionError(f"the body shows a trace or a path: {text[:300]!r}")


@atexit.register
def _write_statuses() -> None:
    path = os.environ.get("FUZZ_STATUS_FILE")
    if path:
        with open(path, "w") as f:
            json.dump({str(k): v for k, v in sorted(STATUSES.items())}, f)
