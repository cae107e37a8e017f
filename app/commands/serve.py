"""``sparsescope serve``: the web app on http://127.0.0.1:8000 (the default command).

Flags override the ``SPARSESCOPE_*`` environment (app/engine/settings.py). The model is loaded
before the server starts, so a bad ``--model`` / ``--artefact`` is a one-line error, not a
traceback; the warm-up (one analysis) runs once the server answers.
"""

from __future__ import annotations

import argparse
import logging
import sys
import threading

from sparse_core.errors import SparsescopeError

from .common import add_artefact, add_device, add_max_tokens, add_model

log = logging.getLogger(__name__)


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "serve",
        help="run the web app (the default command)",
        description="Serve the sparsescope page and its JSON API. Binds 127.0.0.1 (this machine "
        "only) unless --host says otherwise.",
    )
    p.add_argument("--host", default=None, help="interface to bind (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=None, help="TCP port (default 8000)")
    add_device(p, setting=True)
    add_model(p, several=True)
    add_max_tokens(p, setting=True)
    add_artefact(p)
    p.add_argument(
        "--artefact-dir",
        default=None,
        help="folder of Sparsefinder artefacts of any model, matched by model id and alpha "
        "(default: <data dir>/artefacts; `sparsescope fit --out` writes there)",
    )
    p.add_argument("--data-dir", default=None, help="folder for user data (e.g. share links)")
    p.add_argument(
        "--results",
        default=None,
        metavar="DIR",
        help="show a `sparsescope pareto --out DIR` folder's corpus results in the page "
        "(pareto.json, pareto-heads.npz; read only, checked at start)",
    )
    p.set_defaults(run=run)


def settings_from_args(args: argparse.Namespace):
    import os

    from ..engine.settings import ENV_PREFIX, Settings, served_by_default

    models = tuple(args.model) if args.model else None
    if models is None and not any(
        (os.environ.get(ENV_PREFIX + k) or "").strip() for k in ("MODELS", "MODEL_PATH")
    ):  # nothing configured: the default model and its counterpart
        models = served_by_default()
    return Settings.from_env(
        host=args.host,
        port=args.port,
        device=args.device,
        models=models,
        max_tokens=args.max_tokens,
        artefact_path=args.artefact,
        artefact_dir=args.artefact_dir,
        data_dir=args.data_dir,
        results_dir=args.results,
    )


#: ``sys.setswitchinterval`` of the server process (Python's default: 5 ms). A thread that wants
#: the GIL asks its holder to drop it after this long; on a loaded machine with the pool's threads
#: busy in Python, 0.5 ms made a thread's start (which needs the GIL once) ~15x faster than 5 ms
#: (docs/benchmarks.md, "/healthz at a burst's onset").
SWITCH_INTERVAL_S = 0.001


def warm_when_serving(server, service, say, stopped: threading.Event) -> threading.Thread:
    """Run the service's warm-up (``AnalysisService.warm_up``) in a thread of its own as soon as
    ``server`` has started (uvicorn's ``started``), unless it stopped first; then move the
    start-up objects (the models, torch, spaCy's pipeline, the imported modules) out of the
    garbage collector's walks: they stay for the server's life, and a full collection took
    ~0.2 s of the GIL with them (app/engine/memory.py); the freeze itself takes ~0.3 s, off the
    start's path. A failed warm-up is logged and the server goes on: each model's first
    analysis then pays the start-up cost itself."""

    def warm() -> None:
        while not server.started:
            if stopped.wait(0.02):
                return
        from ..engine.memory import freeze_startup_objects

        try:
            service.warm_up(say)
        except Exception:  # noqa: BLE001 - the server serves on without a warm-up
            log.exception("the warm-up failed; each model's first analysis pays its start-up")
        log.debug("%d start-up objects frozen for the garbage collector", freeze_startup_objects())

    thread = threading.Thread(target=warm, name="sparsescope-warm-up", daemon=True)
    thread.start()
    return thread


def run(args: argparse.Namespace) -> int:
    import uvicorn

    from ..engine.memory import limit_malloc_arenas
    from ..engine.service import AnalysisService
    from ..engine.store import ShareStore
    from ..web.connections import DrainingServer, bind, uvicorn_options
    from ..web.main import create_app

    limit_malloc_arenas()  # before the model and the server start their threads
    settings = settings_from_args(args)
    # every start-up failure is one line on stderr and exit 2 (app/cli.py), before the model
    # loads where it can: the port, then the share database (checked, never written if foreign)
    bind(settings.host, settings.port).close()  # free now; uvicorn binds it again at once
    ShareStore.in_dir(settings.data_dir).close()
    service = AnalysisService(settings)
    # load errors surface here; the lifespan's start then finds the service started and does
    # nothing

    def say(message: str) -> None:
        print(f"sparsescope: {message}", flush=True)

    # the warm-up (the tagger's load, each model's first analysis) runs once the server answers
    # (warm_when_serving): the first start serves ~2 s sooner, and an analysis sent meanwhile
    # waits for it on the model's worker as it would behind any other
    service.start(step=say, warm=False)
    # the event loop (which answers /healthz) waits for the GIL each time it needs it, behind
    # up to one switch interval per busy Python thread (summaries, JSON): 1 ms instead of 5
    sys.setswitchinterval(SWITCH_INTERVAL_S)
    if settings.host not in ("127.0.0.1", "localhost", "::1"):
        log.warning("binding %s: anyone who can reach this machine can use the app", settings.host)
        if settings.host_allowlist() is None:
            log.warning(
                "any Host header is answered: set SPARSESCOPE_ALLOWED_HOSTS to this server's "
                "names (docs/api.md, Limits)"
            )
    names = ", ".join(getattr(service, "slots", None) or ["the model"])
    print(f"sparsescope: serving {names} on http://{settings.host}:{settings.port}", flush=True)
    config = uvicorn.Config(
        create_app(settings, service),
        host=settings.host,
        port=settings.port,
        log_level="info" if args.verbose else "warning",
        **uvicorn_options(settings),
    )
    # SIGTERM: queued analyses answered 503 at once, running ones finished
    server = DrainingServer(config, on_shutdown=service.begin_shutdown)
    stopped = threading.Event()
    warm_when_serving(server, service, say, stopped)
    try:
        server.run()
    except KeyboardInterrupt:
        pass
    finally:
        stopped.set()
    if not server.started:  # the app's start-up failed after all
        raise SparsescopeError("the server did not start; the log above says why")
    return 0
