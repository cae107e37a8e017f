"""sparsescope in a notebook: an anywidget that shows a model run with the page's own head grid,
method panel, metrics and heatmap, computed in Python (no server), offline.

    from sparsescope.widget import AttentionWidget
    w = AttentionWidget(model, "The chef who ran to the store was out of food.", alpha=1.5)
    w                      # the view (JupyterLab, Notebook, VS Code, Colab, marimo)
    w.layer, w.head = 2, 3 # redraws; clicking a tile in the view sets them here
    w.method, w.params = "bigbird", {"random_keys": 2}
    w.metrics()            # recall, sparsity, exact, precision of that setting on that head

The view's JavaScript is the page's modules (frontend/js: grid.js, controls.js, heatmap.js,
live.js, state.js and what they import) plus frontend/js/widget/widget.js, bundled at import time
into one ES module string by :func:`bundle` (anywidget takes a single module), read from the
installed package, like the CSS (static/css/widget.css): no CDN, no network.

Data: the analysis body and each head's payload are the API's own (``AnalysisService``,
app/engine/payloads.py), so the view and the page show the same thing. Traits ``layer``, ``head``,
``method`` and ``params`` are synced both ways and validated (a bad value raises
``traitlets.TraitError`` naming what is allowed); ``text``, ``alpha`` and ``causal`` re-run the
model when set.

Needs the optional extra ``notebook`` (``pip install 'sparsescope[notebook]'``: anywidget).
"""

from __future__ import annotations

import json
import logging
import posixpath
import re
from functools import lru_cache
from importlib import resources
from typing import Any

try:
    import anywidget
    import traitlets
except ImportError as err:  # pragma: no cover - the message is the point
    raise ImportError(
        "sparsescope.widget needs anywidget: pip install 'sparsescope[notebook]'"
    ) from err

import torch

from sparse_core.errors import SparsescopeError
from sparse_core.methods import METHODS, available

from .engine.request import AnalysisRequest, check_alpha
from .engine.service import AnalysisService
from .engine.settings import Settings
from .engine.slot import ModelSlot

log = logging.getLogger(__name__)

__all__ = ["AttentionWidget", "bundle", "BundleError"]

ENTRY = "widget/widget.js"
#: thumbnail side in pooled cells, at most (THUMB of frontend/js/grid.js)
THUMB = 24

# ----------------------------------------------------------------------------- the ESM bundle


class BundleError(ValueError):
    """A module uses a form of import / export the bundler does not handle."""


_IMPORT = re.compile(
    r"^import\s+(?:\{(?P<names>[^}]*)\}|\*\s+as\s+(?P<ns>\w+))\s+from\s+"
    r"[\"'](?P<spec>[^\"']+)[\"']\s*;?[ \t]*$",
    re.M,
)
_EXPORT_DECL = re.compile(
    r"^export\s+(?P<kind>(?:async\s+)?function\s*\*?|const|class)\s+(?P<name>\w+)", re.M
)
_EXPORT_LIST = re.compile(r"^export\s*\{(?P<names>[^}]*)\}\s*;?[ \t]*$", re.M)
_LEFT = re.compile(r"^(?:import|export)\b.*$", re.M)


def _js_root():
    return resources.files("sparsescope.frontend").joinpath("js")


def _read(path: str) -> str:
    node = _js_root()
    for part in path.split("/"):
        node = node.joinpath(part)
    return node.read_text(encoding="utf-8")


def _module(path: str, source: str, ids: dict[str, str]) -> tuple[str, list[str]]:
    """One module's body as a function-scoped block and the paths it imports."""
    deps: list[str] = []

    def on_import(m: re.Match) -> str:
        spec = m.group("spec")
        if not spec.startswith("."):
            raise BundleError(f"{path}: only relative imports are bundled, got {spec!r}")
        dep = posixpath.normpath(posixpath.join(posixpath.dirname(path), spec))
        deps.append(dep)
        var = ids.setdefault(dep, f"__m{len(ids)}")
        if m.group("ns"):
            return f"const {m.group('ns')} = {var};"
        parts = []
        for item in m.group("names").split(","):
            item = item.strip()
            if not item:
                continue
            name, _, alias = (x.strip() for x in item.partition(" as "))
            parts.append(f"{name}: {alias}" if alias else name)
        return f"const {{ {', '.join(parts)} }} = {var};"

    body = _IMPORT.sub(on_import, source)
    exported: list[str] = []

    def on_decl(m: re.Match) -> str:
        exported.append(m.group("name"))
        return f"{m.group('kind')} {m.group('name')}"

    body = _EXPORT_DECL.sub(on_decl, body)

    def on_list(m: re.Match) -> str:
        for item in m.group("names").split(","):
            item = item.strip()
            if item:
                name, _, alias = (x.strip() for x in item.partition(" as "))
                exported.append(f"{alias}: {name}" if alias else name)
        return ""

    body = _EXPORT_LIST.sub(on_list, body)
    left = _LEFT.search(body)
    if left:
        raise BundleError(f"{path}: cannot bundle {left.group(0).strip()!r}")
    block = f"{body}\nreturn Object.freeze({{ {', '.join(exported)} }});"
    return block, deps


@lru_cache(maxsize=4)
def bundle(entry: str = ENTRY) -> str:
    """The ES module anywidget loads: ``entry`` (a path under frontend/js) and every module it
    imports, each in its own function scope, instantiated afresh for every view (the page's
    store is a module singleton: one per view). Its default export is ``{render}``.

    Raises :class:`BundleError` for an import cycle or an import / export form it does not
    rewrite (``export default``, ``export let``, bare specifiers), rather than emit a bundle that
    would fail in the browser.
    """
    ids: dict[str, str] = {entry: "__m0"}
    blocks: dict[str, str] = {}
    order: list[str] = []
    visiting: set[str] = set()

    def visit(path: str) -> None:
        if path in blocks:
            return
        if path in visiting:
            raise BundleError(f"import cycle through {path}")
        visiting.add(path)
        block, deps = _module(path, _read(path), ids)
        for dep in deps:
            visit(dep)
        visiting.discard(path)
        blocks[path] = block
        order.append(path)

    visit(entry)
    parts = [
        "// sparsescope notebook widget: generated by sparsescope.widget.bundle() from",
        f"// frontend/js ({len(order)} modules). Do not edit; edit the modules.",
        "function instantiate() {",
    ]
    for path in order:
        parts.append(f"// ---- {path}\nconst {ids[path]} = (() => {{\n{blocks[path]}\n}})();")
    parts.append(f"return {ids[entry]};\n}}")
    parts.append("export default { render(props) { return instantiate().render(props); } };")
    return "\n".join(parts) + "\n"


def _css() -> str:
    css = resources.files("sparsescope.static").joinpath("css").joinpath("widget.css")
    return css.read_text(encoding="utf-8")


# ----------------------------------------------------------------------------- the widget


class AttentionWidget(anywidget.AnyWidget):
    """One model run in a notebook: head grid, method controls, metrics and heatmap.

    ``model``: a loaded sparse_core model (e.g. ``sparse_core.load_model()``, or the tiny test
    model), a model name / directory, or None for the default model. ``artefact``: a Sparsefinder
    artefact to use (None: the one fitted for this model at ``alpha``, if any).
    """

    _esm = bundle()  # built once, at import, from the installed package's modules
    _css = _css()

    text = traitlets.Unicode("").tag(sync=True)
    alpha = traitlets.Float(1.5).tag(sync=True)
    causal = traitlets.Bool(False).tag(sync=True)
    layer = traitlets.Int(0).tag(sync=True)
    head = traitlets.Int(0).tag(sync=True)
    method = traitlets.Unicode("window").tag(sync=True)
    params = traitlets.Dict().tag(sync=True)
    _analysis = traitlets.Dict().tag(sync=True)
    _head = traitlets.Dict().tag(sync=True)
    #: the current setting's recall on every head ({method, params, recall: [L·H floats]}),
    #: which the grid's "recall" colouring shows (the page computes it in the browser, sweep.js)
    _recall = traitlets.Dict().tag(sync=True)
    #: every head's graph max-pooled to k × k (k = min(n, 24)) for the grid's thumbnails
    #: ({analysis, k, probs: [L·H lists of k·k]}); the page draws them as heads load
    _thumbs = traitlets.Dict().tag(sync=True)

    def __init__(
        self,
        model: Any = None,
        text: str = "The chef who ran to the store was out of food.",
        *,
        alpha: float = 1.5,
        causal: bool = False,
        layer: int = 0,
        head: int = 0,
        method: str = "window",
        params: dict | None = None,
        artefact: Any = None,
        settings: Settings | None = None,
        **kwargs: Any,
    ) -> None:
        settings = settings or Settings(warmup=False)
        if model is None or isinstance(model, str):
            slot = ModelSlot(settings, name=model)
        else:
            slot = ModelSlot(settings, model=model, artefact=artefact)
        self._service = AnalysisService(settings, slots=[slot])
        self._service.start()
        self._entry = None
        self._running = False  # inside _analyse: the causal it sets is not a new input
        super().__init__(**kwargs)
        # set in an order every validator can check: the analysis first, then head and method
        with self.hold_trait_notifications():
            self.text = text
            self.alpha = alpha
            self.causal = causal
        self._analyse()
        self.layer, self.head = layer, head
        self.method = method
        self.params = params or {}
        self._send_head()
        self._send_recall()

    # -- what Python reads ---------------------------------------------------------------------

    @property
    def analysis(self) -> dict:
        """The analysis body (as ``POST /api/analyze`` answers it)."""
        return dict(self._analysis)

    def metrics(self) -> dict[str, float]:
        """Recall, sparsity, exact, precision and block sparsity (``block_16`` … ``block_128``) of
        ``method`` with ``params`` on the open head (definitions §4; sparse_core.methods.evaluate,
        the figures the view's metrics panel shows)."""
        from sparse_core.methods import evaluate

        m = evaluate(self._entry.ctx, self.method, dict(self.params))
        return {k: float(v[self.layer, self.head]) for k, v in m.items()}

    # -- validation ----------------------------------------------------------------------------

    @traitlets.validate("text")
    def _valid_text(self, proposal):
        text = proposal["value"]
        if not text.strip():
            raise traitlets.TraitError("text must not be empty")
        return text

    @traitlets.validate("alpha")
    def _valid_alpha(self, proposal):
        try:
            return check_alpha(proposal["value"])
        except SparsescopeError as err:
            raise traitlets.TraitError(str(err)) from None

    @traitlets.validate("layer", "head")
    def _valid_index(self, proposal):
        name, v = proposal["trait"].name, proposal["value"]
        a = self._analysis
        if a:
            count = a["layers"] if name == "layer" else a["heads"]
            if not 0 <= v < count:
                raise traitlets.TraitError(
                    f"{name} must be in [0, {count - 1}] for this model, got {v}"
                )
        return v

    @traitlets.validate("method")
    def _valid_method(self, proposal):
        name = proposal["value"]
        names = self._available()
        if name not in names:
            why = (
                " (it needs a Sparsefinder artefact, and none is fitted for this model and alpha)"
                if name in METHODS
                else ""
            )
            raise traitlets.TraitError(
                f"method must be one of {', '.join(names)}, got {name!r}{why}"
            )
        return name

    @traitlets.validate("params")
    def _valid_params(self, proposal):
        if not self._analysis:
            return proposal["value"]
        try:
            return self._clean(self.method, proposal["value"])
        except SparsescopeError as err:
            raise traitlets.TraitError(str(err)) from None

    # -- reactions -----------------------------------------------------------------------------

    @traitlets.observe("text", "alpha", "causal")
    def _on_input(self, change):
        if self._entry is not None and not self._running:
            self._analyse()

    @traitlets.observe("layer", "head")
    def _on_head(self, change):
        if self._entry is not None:
            self._send_head()

    @traitlets.observe("method")
    def _on_method(self, change):
        # as the page's method picker does: the new method starts at its defaults
        if self._analysis:
            self.params = self._clean(self.method, {})

    @traitlets.observe("params")
    def _on_params(self, change):
        if self._entry is not None:
            self._send_recall()

    # -- internals -----------------------------------------------------------------------------

    def _artefact(self):
        return self._service.slot.artefact_for(self.alpha)[0]

    def _available(self) -> list[str]:
        return available(self._artefact())

    def _clean(self, method: str, params: dict) -> dict:
        return METHODS[method].validate(self._analysis["n"], dict(params), self._artefact())

    def _analyse(self) -> None:
        """Run the model on (text, alpha, causal) and send the analysis; keep layer, head,
        method and params where they still apply."""
        try:
            request = AnalysisRequest(self.text, self.alpha, self.causal, truncate=True)
            entry = self._service.analyze_entry(request)
        except SparsescopeError as err:
            raise traitlets.TraitError(str(err)) from None
        self._entry = entry
        body = dict(entry.body)
        body["text"] = self.text
        with self.hold_trait_notifications():
            self._analysis = json.loads(json.dumps(body))
            # what ran: a decoder (GPT-2 style) is causal whatever was asked; the trait says so
            # (set once the entry is cached, so the re-run it notifies is a cache hit)
            self._running = True
            self.causal = bool(body["causal"])
            if self.layer >= body["layers"]:
                self.layer = 0
            if self.head >= body["heads"]:
                self.head = 0
            if self.method not in self._available():
                self.method = "window"
            try:
                self.params = self._clean(self.method, self.params)
            except SparsescopeError:
                self.params = self._clean(self.method, {})
        self._running = False
        self._send_head()
        self._send_recall()
        self._send_thumbs()

    def _send_thumbs(self) -> None:
        """Max-pool every head's probabilities into k × k blocks (the bounds of the page's
        thumbImage, frontend/js/grid.js), rounded to 4 decimals."""
        probs = self._entry.out.probs.float()  # (L, H, n, n)
        n = probs.shape[-1]
        k = min(n, THUMB)

        def bounds(a: int) -> tuple[int, int]:
            lo = (a * n) // k
            return lo, max(lo + 1, ((a + 1) * n) // k)

        rows = torch.stack([probs[:, :, slice(*bounds(a)), :].amax(2) for a in range(k)], 2)
        pooled = torch.stack([rows[..., slice(*bounds(b))].amax(-1) for b in range(k)], -1)
        flat = pooled.flatten(2).flatten(0, 1)  # (L·H, k·k)
        self._thumbs = {
            "analysis": self._entry.id,
            "k": k,
            "probs": [[round(v, 4) for v in row] for row in flat.tolist()],
        }

    def _send_recall(self) -> None:
        from sparse_core.methods import evaluate

        recall = evaluate(self._entry.ctx, self.method, dict(self.params))["recall"]
        self._recall = {
            "analysis": self._entry.id,
            "method": self.method,
            "params": dict(self.params),
            "recall": [round(float(v), 6) for v in recall.flatten().tolist()],
        }

    def _send_head(self) -> None:
        raw = self._service.head(self._entry.id, self.layer, self.head)
        self._head = json.loads(raw)
        log.debug("widget: head %d/%d sent (%d bytes)", self.layer, self.head, len(raw))
