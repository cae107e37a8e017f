"""Benchmark: opening a fresh 512-token text on the server against a plain softmax forward
(the target: at most 4×).

"Opening" is what the page asks for when a text is analysed: ``POST /api/analyze``, then the
first head's payload (``GET /api/analyses/{id}/heads/0/0``) and that head's Pareto data
(``GET /api/analyses/{id}/pareto?layer=0&head=0``), one after the other, through the real app
(``sparsescope.web.main.create_app``: every middleware, gzip included, in process through
Starlette's TestClient) on the real default model with its shipped artefact. The reference is a
plain ``transformers.BertModel`` forward of the same weights (eager attention, softmax) on the
same tokens (``bench_entmax.hf_bert``), with the torch thread count the server uses;
``--ref-runs`` (3) forwards back to back each repeat, every one counted (a lone forward after
the requests runs cold and slower: one forward a repeat flattered the ratio).

Every repeat takes a fresh window of WikiText-2 (a cache miss), trimmed to 512 tokens, and runs
the two side by side (interleaved); medians, minima and the per-request split are printed, with
the bytes each response sends gzipped and plain, and the load average before and after.

Two opens per repeat, each of a fresh text: the sequential one above (every method's summary,
three requests one after the other: the figures of earlier runs), and **the page's own**
(frontend/js/session.js): ``POST /api/analyze`` with ``summary: [<the page's first
method>]`` where the server takes it (frontend/js/summary.js), then the head (``?part=graph``
with the shown method's data where the server takes ``method``: session.js; "first paint": its
heatmap can be drawn), then its Pareto data (the page asks for them once the head is in: at once,
each request already using both cores, they only competed); "page open" is the wall time until
the Pareto data have arrived. "rest of summary" is what the page asks for next (every method's
summary, ``GET …/summary``), not part of the open.

Run: ``python bench/bench_open.py --repeats 5`` (figures in docs/benchmarks.md, "Opening a
fresh 512-token text"). ``--n 128`` for a shorter text.

``--server``: through a real server instead: ``sparsescope serve`` in a process of its
own on 127.0.0.1 (``bench_load.live_server``: the real CLI, uvicorn, its own torch threads; no
start-up warm-up of the gallery), every request over HTTP with httpx (gzip accepted, as a
browser does), against the plain forward in this process on ``--ref-threads`` (2) torch threads:
the "lone analysis on both cores" floor is open ≤ 4x a 2-thread softmax forward.
``--against CHECKOUT``: a second server from another checkout (with its ``.venv``, e.g.
/work/main), the same texts, the two interleaved (who goes first alternates).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path

import torch

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout
sys.path.insert(0, str(Path(__file__).resolve().parent))

from tests.checkout import use_the_checkout  # noqa: E402

use_the_checkout()  # ``import sparsescope``: this checkout's app/, not an installed copy

from bench_entmax import corpus_text, hf_bert, load, prefix_with_tokens  # noqa: E402

STEPS = ("analyze", "head", "pareto")
#: The page's open (frontend/js/session.js ``analyze`` and ``adopt``): the analysis (with the
#: shown method's summary only where the server takes ``summary``), then the open head (its
#: heatmap painted: "first paint"), then its Pareto data; ``rest``: every method's summary, and
#: the head's other methods' data (``?part=methods``), after.
PAGE = ("page analyze", "head, then", "first paint", "pareto, then", "page open",
        "rest of summary", "rest of head")  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--n", type=int, default=512, help="tokens of each text (specials in)")
    ap.add_argument("--alpha", type=float, default=1.5)
    ap.add_argument("--text-file", help="plain text to take the windows from (default WikiText-2)")
    ap.add_argument("--server", action="store_true", help="through a real uvicorn server")
    ap.add_argument("--ref-threads", type=int, default=2, help="--server: the forward's threads")
    ap.add_argument(
        "--ref-runs",
        type=int,
        default=3,
        help="softmax forwards back to back per repeat (the first runs cold; every one counts)",
    )
    ap.add_argument(
        "--against",
        metavar="CHECKOUT",
        help="--server: also a server of another checkout (its .venv), interleaved, same texts",
    )
    args = ap.parse_args()
    if args.against and not args.server:
        ap.error("--against needs --server")
    if args.server:
        with tempfile.TemporaryDirectory() as tmp, ExitStack() as stack:
            import httpx
            from bench_load import ROOT, live_server

            # no gallery precomputation beside the measurement
            env = {"SPARSESCOPE_WARMUP": "0"}
            roots = [ROOT] + ([Path(args.against).resolve()] if args.against else [])
            clients, labels = {}, []
            for k, root in enumerate(roots):
                server = stack.enter_context(
                    live_server(Path(tmp) / str(k), tiny=False, env=env, start_timeout=600,
                                root=root)
                )  # fmt: skip
                client = stack.enter_context(httpx.Client(base_url=server.url, timeout=600))
                health = client.get("/healthz").json()
                name = "this" if k == 0 else "against"
                clients[name] = client
                labels.append(f"{name}: {root} server pid {server.pid}, model {health['model']}")
            torch.set_num_threads(args.ref_threads)
            run(args, clients, "; ".join(labels), None)
        return

    from fastapi.testclient import TestClient

    from sparsescope.engine.service import AnalysisService
    from sparsescope.engine.settings import Settings
    from sparsescope.web.main import create_app

    tmp = tempfile.TemporaryDirectory()
    # no start-up warm-up: it would also precompute the gallery in the background
    settings = Settings(data_dir=Path(tmp.name), warmup=False)
    service = AnalysisService(settings)
    service.start()  # the model, its thread count (settings.torch_threads)
    service.warmup()
    label = f"model {service.slot.id}, artefact {service.slot.artefact_for(args.alpha)[1]}"
    with TestClient(create_app(settings, service)) as client:
        run(args, {"this": client}, label, service)
    tmp.cleanup()


def takes_summary(client) -> bool:
    """Whether the server's analyze request has the ``summary`` field."""
    schema = client.get("/openapi.json").json()
    return "summary" in schema["components"]["schemas"]["AnalyzeRequest"]["properties"]


def takes_head_methods(client) -> bool:
    """Whether the server's head route has the ``method`` parameter."""
    route = client.get("/openapi.json").json()["paths"]
    params = route["/api/analyses/{analysis_id}/heads/{layer}/{head}"]["get"]["parameters"]
    return any(p["name"] == "method" for p in params)


def first_head_query(method: str) -> str:
    """The page's first head request (frontend/js/session.js ``loadHead``): the graph, with the
    shown method's data when it has any (``methods.js`` PAYLOAD_METHODS: a non-empty
    ``payload_empty``)."""
    from sparse_core.methods import METHODS

    return "?part=graph" + (f"&method={method}" if METHODS[method].payload_empty else "")


def timed(fn):
    t0 = time.perf_counter()
    r = fn()
    assert r.status_code == 200, r.text
    return time.perf_counter() - t0, r


def page_open(
    client, text: str, alpha: float, method: str | None, head_query: str = ""
) -> dict[str, float]:
    """The page's open of ``text``: analyze (``summary: [method]`` when ``method``), then the
    head (``head_query``: the page's first head request where the server takes ``method``, the
    whole payload otherwise; the first paint), then its Pareto data; after the open, the rest of
    the head (its methods' part) and the whole summary (when the server has them)."""
    got: dict[str, float] = {}
    req = {"text": text, "alpha": alpha}
    if method is not None:
        req["summary"] = [method]
    t0 = time.perf_counter()
    got["page analyze"], r = timed(lambda: client.post("/api/analyze", json=req))
    aid = r.json()["id"]
    head = f"/api/analyses/{aid}/heads/0/0"
    got["head, then"] = timed(lambda: client.get(head + head_query))[0]
    got["first paint"] = time.perf_counter() - t0
    got["pareto, then"] = timed(lambda: client.get(f"/api/analyses/{aid}/pareto?layer=0&head=0"))[0]
    got["page open"] = time.perf_counter() - t0
    if head_query:
        got["rest of head"] = timed(lambda: client.get(head + "?part=methods"))[0]
    if method is not None:
        got["rest of summary"] = timed(lambda: client.get(f"/api/analyses/{aid}/summary"))[0]
    return got


def sequential_open(client, text: str, alpha: float, n: int) -> tuple[dict[str, float], dict]:
    """Analyze (every method's summary), then the head, then its Pareto data, one by one."""
    got: dict[str, float] = {}
    req = {"text": text, "alpha": alpha}
    got["analyze"], r = timed(lambda: client.post("/api/analyze", json=req))
    body = r.json()
    assert body["n"] == n, (body["n"], n)
    aid = body["id"]
    urls = {
        "analyze": f"/api/analyses/{aid}",
        "head": f"/api/analyses/{aid}/heads/0/0",
        "pareto": f"/api/analyses/{aid}/pareto?layer=0&head=0",
    }
    for step in ("head", "pareto"):
        got[step] = timed(lambda u=urls[step]: client.get(u))[0]
    got["open"] = sum(got.values())
    return got, urls


def run(args, clients: dict, label: str, service) -> None:
    """The interleaved repeats through each of ``clients`` (in process, or httpx to real
    servers) and the table; ``service`` (in process only) gives the server's stage timings."""
    from sparse_core.view_schema import FIELDS

    tok, bert = hf_bert("cpu")
    words = corpus_text(args.text_file).split()
    count = lambda s: len(tok(s)["input_ids"])  # noqa: E731
    shown = FIELDS["method"].default  # the page's method on a first visit
    method = {k: (shown if takes_summary(c) else None) for k, c in clients.items()}
    first = {
        k: (first_head_query(shown) if takes_head_methods(c) else "") for k, c in clients.items()
    }

    print(
        f"torch {torch.__version__}, {os.cpu_count()} CPUs, torch threads "
        f"{torch.get_num_threads()} (the forward), n = {args.n}, alpha {args.alpha}, repeats "
        f"{args.repeats}, {label}, page's summary: "
        + ", ".join(f"{k} {'[' + m + ']' if m else 'every method'}" for k, m in method.items())
        + ", first head: "
        + ", ".join(f"{k} {'heads/0/0' + q if q else 'whole'}" for k, q in first.items())
        + f", {load()}"
    )
    keys = ("softmax", *[f"{c}:{k}" for c in clients for k in (*STEPS, "open", *PAGE)])
    times: dict[str, list[float]] = {k: [] for k in keys}
    sizes: dict[str, tuple[int, int]] = {}
    refs: list[float] = []  # each repeat's reference: the median of its softmax forwards
    for rep in range(args.repeats + 1):  # repeat 0 warms everything up, not counted
        text = prefix_with_tokens(" ".join(words[800 * rep + 7 :]), args.n, count)
        other = prefix_with_tokens(" ".join(words[800 * rep + 407 :]), args.n, count)
        ids = tok(text, return_tensors="pt")["input_ids"]
        soft = []  # a lone forward runs cold (caches, sleeping threads): the back-to-back ones
        with torch.inference_mode():  # are faster, and the reference is the fastest softmax
            for _ in range(args.ref_runs):
                t0 = time.perf_counter()
                bert(input_ids=ids)
                soft.append(time.perf_counter() - t0)
        got: dict[str, float] = {}
        order = list(clients.items())
        if rep % 2:
            order.reverse()  # who goes first alternates
        for name, client in order:
            seq, urls = sequential_open(client, text, args.alpha, ids.shape[1])
            page = page_open(client, other, args.alpha, method[name], first[name])
            got.update({f"{name}:{k}": v for k, v in {**seq, **page}.items()})
            if rep == 1 and name == "this":  # what each response sends, gzipped and plain
                if first[name]:  # the page's first head request, and the rest of the head
                    urls["1st head"] = urls["head"] + first[name]
                    urls["rest"] = urls["head"] + "?part=methods"
                for step, url in urls.items():
                    plain = client.get(url, headers={"Accept-Encoding": "identity"})
                    with client.stream("GET", url, headers={"Accept-Encoding": "gzip"}) as z:
                        packed = b"".join(z.iter_raw())
                    sizes[step] = (len(packed), len(plain.content))
        if rep == 0:
            continue
        times["softmax"] += soft
        refs.append(statistics.median(soft))
        for k, v in got.items():
            times[k].append(v)
    med = {k: statistics.median(v) for k, v in times.items() if v}
    lo = {k: min(v) for k, v in times.items() if v}
    print(f"    {'':<44} {'median ms':>10} {'x softmax':>9} {'min ms':>9} {'x softmax':>9}")
    rows = [("plain softmax forward (BertModel)", "softmax")]
    for c in clients:
        rows += [(f"{c}: sequential (every method's summary)", None)]
        rows += [(f"  {k}", f"{c}:{k}") for k in STEPS]
        rows += [("  open (analyze + head + pareto)", f"{c}:open")]
        rows += [(f"{c}: the page's open", None)]
        rows += [(f"  {k}", f"{c}:{k}") for k in PAGE]
    for text, k in rows:
        if k is None:
            print(f"    {text}")
        elif k in med:
            print(
                f"    {text:<44} {1e3 * med[k]:10.1f} {med[k] / med['softmax']:8.2f}x "
                f"{1e3 * lo[k]:9.1f} {lo[k] / lo['softmax']:8.2f}x"
            )
    for c in clients:
        print(f"    {c}: page open / softmax per repeat: " + ", ".join(
            f"{o / s:.2f}x" for o, s in zip(times[f"{c}:page open"], refs, strict=True)
        ))  # fmt: skip
    for step, (z, p) in sizes.items():
        print(f"    {step:<8} sends {z / 1024:8.1f} KiB gzipped ({p / 1024:8.1f} KiB plain)")
    if service is not None:
        t = service.stats.timings
        print(
            "    last analyze, server stages: "
            + ", ".join(f"{k} {1e3 * v:.0f} ms" for k, v in t.items())
        )
    print(f"    {load()}")


if __name__ == "__main__":
    main()
