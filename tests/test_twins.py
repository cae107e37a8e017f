"""The browser's JS twins against Python, under node (no browser): golden data from Python, checked
by tests/js/check_twins.mjs.

The page recomputes every method's mask from one head's payload (frontend/js/methods.js,
patterns.js, rng.js), its metrics (metrics.js) and reads parameter values the way
``ParamSpec.clean`` does (params.js). Here Python writes what those twins must give:

- ``registry``: ``sparse_core.methods.METHODS`` names, in order (methods.js PREDICTORS must name
  exactly these);
- ``rng``: ``hash_u32`` / ``hash_uniform`` vectors (rng.js);
- ``coercion``: ParamSpecs as the API serves them, raw values (numbers, strings, booleans, null,
  bad ones too) and ``ParamSpec.clean``'s answer: the value, or rejected;
- ``heads``: head payloads fetched through the real HTTP contract (POST /api/analyze, GET
  /api/analyses/{id}/heads/{l}/{h} on the tiny model with a random artefact), the analysis'
  method specs, and per method x parameter set the finished mask that
  ``METHODS[name].predict(PredictContext.from_run(out, artefact), **params)`` gives for that head
  with its four metrics (``sparse_core.metrics``), or that Python rejects the setting; plus the
  server's Pareto points for the head, which the JS must reproduce setting by setting.

The golden format is ``"sparsescope-twins/1"``; see tests/js/check_twins.mjs for the checks. A new
metric is one more key in each case's ``metrics`` and in what ``computeMetrics`` returns (block
sparsity is ``"block_sparsity": {"16": …, "128": …}``, compared key by key; ``blocks``
adds random masks at lengths around the tile sizes, ragged tiles included). While editing a
twin, keep the golden file and rerun only node::

    SPARSESCOPE_TWINS_GOLDEN=/tmp/twins.json python -m pytest tests/test_twins.py -k equal
    node tests/js/check_twins.mjs /tmp/twins.json
"""

from __future__ import annotations

import copy
import dataclasses
import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
import torch
from fastapi.testclient import TestClient

from sparse_core import metrics
from sparse_core.errors import SparsescopeError
from sparse_core.methods import METHODS, PredictContext
from sparse_core.rng import hash_u32, hash_uniform
from sparsescope.engine.service import AnalysisService
from sparsescope.engine.settings import Settings
from sparsescope.web.main import create_app
from tests.browser.conftest import random_artefact

ROOT = Path(__file__).resolve().parents[1]
CHECK = ROOT / "tests" / "js" / "check_twins.mjs"
JS_ROOT = ROOT / "frontend" / "js"
NODE = shutil.which("node")
FORMAT = "sparsescope-twins/1"

#: A text of 70 tokens under the tiny model (several 16- and 32-token blocks, a ragged last one).
LONG = (
    "The chef who ran to the store was out of food, so he went back home again. Later that "
    "evening the neighbours came over with bread, cheese and a large pot of soup, and they all "
    "sat in the kitchen talking about the storm that had closed the road for two days, and "
    "about the river that rose over the old bridge."
)
#: (text, max_positions or None, heads): n = 1 and 2 come from a model with 1 / 2 positions and
#: truncate=true ([SEP] alone, [CLS] [SEP]); then n = 9 (odd), 14 (even), 21 and 70.
TEXTS = [
    ("One token only.", 1, [(0, 0)]),
    ("Two tokens.", 2, [(1, 3)]),
    ("The chef ran to the store.", None, [(0, 1), (1, 3)]),
    ("The chef who ran to the store was out of food.", None, [(0, 2), (1, 0)]),
    ("The chef who ran to the store was out of food, so he went back home again.", None, [(1, 2)]),
    # n = 70: several 16- and 32-token blocks for the arena's block methods
    (LONG, None, [(1, 1)]),
]
#: an alpha the random artefact is not fitted for: the sf-* settings are
#: rejected by Python and must be refused by the JS too
NO_ARTEFACT = ("The chef ran to the store.", 2.0, [(0, 3)])

RNG_CASES = [[0], [1, 2, 3], [7, 0, 5, 2], [-5, 3], [2**32 + 9, 2**31], [1005, 1, 511, 19], [0, 7]]

# fmt: off
#: raw values for ParamSpec.clean: every spec sees every value. No integral floats (JSON gives
#: the JS 1 for 1.0, and Python's bool spec accepts the int 1 but not the float 1.0).
RAW_VALUES = [
    0, 1, 2, 3, 4, 5, 8, 12, -1, 2.5, 0.05, 7.75, 1e9, -3.5, 2**40,
    True, False, None,
    "0", "1", "2", "3", "4", "5", "8", "8.0", "8.5", "8.9", "-8", " 5 ", "5.", ".5", "+4",
    "1e1", "2e-1", "1_0", "1__0", "_1", "0x10", "", " ", "abc", "inf", "-inf", "nan",
    "Infinity", "1e999", "true", "false", "TRUE", "False", "yes", "on", "no", "off",
    " true", "A1", "a1", "A2", "union", "Union",
]
# fmt: on


def _mask_string(m: torch.Tensor) -> str:
    """An (n, n) bool mask as n² characters "0"/"1", row-major."""
    return "".join("1" if v else "0" for v in m.flatten().tolist())


def _short_model(model, positions: int | None):
    """``model`` with a smaller position limit (same weights), so truncation gives n = 1 or 2."""
    if positions is None:
        return model
    short = copy.copy(model)
    short.config = dataclasses.replace(model.config, max_positions=positions)
    return short


def _param_sets(name: str, n: int, specs: dict) -> list[dict]:
    """Parameter sets for ``name`` at length n: defaults, each own parameter at its edges, the
    add-ons (odd and even windows, 0 = off, the widest, globals on and off) and cross-parameter
    violations (c > stride, top_k > B) that Python rejects. Values a spec refuses by itself are
    coercion cases, not mask cases, and are left out here."""
    top = 2 * n - 1
    sets: list[dict] = [{}]
    for w, g in [(0, False), (0, True), (1, True), (2, False), (3, True), (4, False), (5, True),
                 (top, False), (top, True)]:  # fmt: skip
        sets.append({"window": w, "globals": g})
    off = {"window": 0, "globals": False}
    strides = sorted({1, 2, 3, max(1, n // 2), n})
    if name == "fixed":
        for s in strides:
            for c in sorted({1, max(1, s // 2), s}):
                sets.append({"stride": s, "c": c, **off})
            sets.append({"stride": s, "c": s + 1, **off})  # c > stride: rejected
        for part in ("A1", "A2", "union"):
            sets.append({"part": part, **off})
            sets.append({"part": part, "stride": 2, "c": 1, "spread": True, "globals": True})
        sets.append({"stride": n, "c": 1, "spread": True, "window": 3})
    elif name == "strided":
        for s in strides:
            for part in ("A1", "A2", "union"):
                sets.append({"stride": s, "part": part, **off})
    elif name == "bigbird":
        for r in sorted({0, 1, 3, n}):
            sets += [{"random_keys": r, **off}, {"random_keys": r, "window": 3, "globals": True}]
    elif name == "longformer":
        for g in sorted({0, 1, 4, n}):
            sets += [{"n_globals": g, **off}, {"n_globals": g, "window": 5, "globals": True}]
    elif name == "reformer":
        for b in specs["n_buckets"].choices:
            sets.append({"n_buckets": b, "rounds": 1, **off})
        sets += [{"rounds": r, **off} for r in (2, 3, 4)]
    elif name == "routing":
        sets += [{"n_clusters": c, **off} for c in specs["n_clusters"].choices]
    elif name == "sf-distance":
        sets += [{"t": t, **off} for t in (0.0, 0.05, 0.5, 1.0, 2.0, 3.7, 10.0)]
    elif name == "sf-quantization":
        sets += [{"n_buckets": b, **off} for b in sorted({1, 2, 3, max(1, n // 2), n})]
    elif name == "sf-kmeans":
        top_max = specs["top_k"].max
        for b in specs["n_clusters"].choices:
            for k in sorted({1, 2, b, b + 1}):  # top_k = B + 1 > B: rejected
                if k <= top_max:
                    sets.append({"n_clusters": b, "top_k": k, **off})
    elif name == "streaming":
        for sk in sorted({0, 1, 4, n}):
            for r in sorted({0, 1, 3, n - 1}):
                sets.append({"sinks": sk, "recent": r, **off})
    elif name == "indexer":
        kmax = specs["k"].max
        sets += [{"k": k, **off} for k in sorted({1, 2, 3, kmax})]
        sets.append({"k": 2, "window": 3, "globals": True})
    elif name == "seer":
        for b in specs["block"].choices:
            for k in sorted({1, 2, 3, specs["topk"].max}):
                sets.append({"block": b, "topk": k, **off})
    elif name == "topk":
        kmax = specs["k"].max
        sets += [{"k": k, **off} for k in sorted({1, 2, 3, kmax})]
    elif name == "topp":
        sets += [{"p": p, **off} for p in (0.01, 0.3, 0.5, 0.77, 0.9, 0.99, 1.0)]
    elif name == "h2o":
        for r in sorted({0, 1, 4}):
            for k in sorted({0, 1, 3, 8, n}):
                sets.append({"recent": r, "k": k, **off})
    elif name in ("moba", "quest"):
        bp = "block" if name == "moba" else "page"
        for b in specs[bp].choices:
            for k in sorted({1, 2, 3, specs["topk"].max}):
                sets.append({bp: b, "topk": k, **off})
    elif name == "xattention":
        for b in specs["block"].choices:
            for st in specs["stride"].choices:
                for tau in (0.05, 0.5, 0.9, 1.0):
                    sets.append({"block": b, "stride": st, "tau": tau, **off})
    elif name == "vertical-slash":
        for last in sorted({1, 3, n}):
            for v, sl in [(0, 0), (1, 2), (3, 0), (0, 5), (4, 4), (n, 2 * n - 1)]:
                sets.append({"last": last, "verticals": v, "slashes": sl, **off})
    elif name == "sparge":
        for b in specs["block"].choices:
            for th in (0.0, 0.3, 0.6, 0.95, 1.0):
                for tau in (0.05, 0.5, 0.9, 1.0):
                    sets.append({"block": b, "theta": th, "tau": tau, **off})
    out = []
    for p in sets:  # keep only values each spec accepts on its own
        try:
            for k, v in p.items():
                specs[k].clean(v)
        except SparsescopeError:
            continue
        if p not in out:
            out.append(p)
    return out


def _cases(ctx: PredictContext, layer: int, head: int, artefact) -> list[dict]:
    """Every method x parameter set: the finished mask of head (layer, head) and its metrics,
    or ``rejected`` with Python's message."""
    out, n = ctx.out, ctx.n
    gold = out.graph[layer, head]
    cases = []
    for name, method in METHODS.items():
        specs = {s.name: s for s in method.params(n, artefact)}
        for params in _param_sets(name, n, specs):
            case: dict = {"method": name, "params": params}
            try:
                mask = method.predict(ctx, **params)[layer, head]
            except SparsescopeError as exc:
                case["rejected"] = str(exc)
            else:
                case["mask"] = _mask_string(mask)
                case["metrics"] = {
                    "recall": float(metrics.recall(mask, gold)),
                    "sparsity": float(metrics.sparsity(mask, causal=out.causal)),
                    "exact": float(metrics.exact(mask, gold)),
                    "precision": float(metrics.precision(mask, gold, causal=out.causal)),
                    "mass_recall": float(metrics.mass_recall(mask, out.probs[layer, head])),
                    "block_sparsity": {
                        b: float(v)
                        for b, v in metrics.block_sparsities(mask, causal=out.causal).items()
                    },
                }
            cases.append(case)
    return cases


def _analyse(model, artefact, tmp: Path, text, alpha, causal, heads, positions=None) -> list[dict]:
    """Golden heads of one text: payloads through the HTTP contract, masks from sparse_core."""
    settings = Settings(data_dir=tmp, warmup=False)
    service = AnalysisService(settings, model=model, artefact=artefact)
    body = {"text": text, "alpha": alpha, "causal": causal, "truncate": positions is not None}
    with TestClient(create_app(settings, service)) as client:
        r = client.post("/api/analyze", json=body)
        assert r.status_code == 200, r.text
        analysis = r.json()
        payloads, pareto = {}, {}
        for layer, head in heads:
            r = client.get(f"/api/analyses/{analysis['id']}/heads/{layer}/{head}")
            assert r.status_code == 200, r.text
            payloads[layer, head] = r.json()
            r = client.get(f"/api/analyses/{analysis['id']}/pareto?layer={layer}&head={head}")
            assert r.status_code == 200, r.text
            pareto[layer, head] = r.json()
    run = model.run(text, alpha=alpha, causal=causal, truncate=positions is not None)
    used = artefact if analysis["artefact"] else None
    ctx = PredictContext.from_run(run, used)
    assert run.n == analysis["n"]
    out = []
    for layer, head in heads:
        payload = payloads[layer, head]
        edges = {(i, j) for i, j, _ in payload["edges"]}
        assert edges == {tuple(e) for e in run.graph[layer, head].nonzero().tolist()}
        out.append(
            {
                "name": f"n={run.n} {'causal' if causal else 'bidirectional'} alpha={alpha} "
                f"L{layer}H{head}",
                "n": run.n,
                "causal": causal,
                "alpha": alpha,
                "artefact": bool(analysis["artefact"]),
                "payload": payload,
                "methods": analysis["methods"],
                "cases": _cases(ctx, layer, head, used),
                "pareto": {"points": pareto[layer, head]["points"]},
            }
        )
    return out


def _coercion(head: dict, artefact) -> list[dict]:
    """``ParamSpec.clean`` on every raw value, for every distinct ParamSpec the API served for
    ``head``'s analysis (the specs the page itself reads)."""
    cases, seen = [], set()
    for served in head["methods"]:
        py = {s.name: s for s in METHODS[served["name"]].params(head["n"], artefact)}
        for spec in served["params"]:
            key = json.dumps({**spec, "label": "", "help": ""}, sort_keys=True)
            if key in seen:
                continue
            seen.add(key)
            clean = py[spec["name"]].clean
            for raw in RAW_VALUES:
                case = {"method": served["name"], "spec": spec, "raw": raw}
                try:
                    case["value"] = clean(raw)
                except (SparsescopeError, OverflowError) as exc:
                    # OverflowError: clean("inf") on an int choice (a Python defect: the API
                    # answers 500); the JS refuses the value, which is what Python means
                    case["rejected"] = f"{type(exc).__name__}: {exc}"
                cases.append(case)
    return cases


@pytest.fixture(scope="module")
def golden(tiny_model, tmp_path_factory) -> dict:
    """The golden data (module docstring), built once."""
    artefact = random_artefact(tiny_model)
    heads = []
    for text, positions, picks in TEXTS:
        model = _short_model(tiny_model, positions)
        for causal in (False, True):
            tmp = tmp_path_factory.mktemp("twins")
            heads += _analyse(model, artefact, tmp, text, 1.5, causal, picks, positions)
    text, alpha, picks = NO_ARTEFACT
    heads += _analyse(tiny_model, artefact, tmp_path_factory.mktemp("twins"), text, alpha, False,
                      picks)  # fmt: skip
    coercion = _coercion(next(h for h in heads if h["n"] == 14 and h["artefact"]), artefact)
    return {
        "format": FORMAT,
        "registry": list(METHODS),
        "rng": [{"ints": c, "u32": hash_u32(*c), "uniform": hash_uniform(*c)} for c in RNG_CASES],
        "coercion": coercion,
        "heads": heads,
        "blocks": _block_cases(),
    }


def _block_cases() -> list[dict]:
    """Random sparse masks at lengths around the tile sizes (ragged last tiles) and their
    ``metrics.block_sparsities``; JS computeMetrics must give the same figures to the bit."""
    g = torch.Generator().manual_seed(15)
    out = []
    for n in (15, 16, 17, 33, 64, 65, 130, 200):
        for causal in (False, True):
            mask = torch.rand(n, n, generator=g) < 3.0 / n**1.5
            want = metrics.block_sparsities(mask, causal=causal)
            out.append({"n": n, "causal": causal, "mask": _mask_string(mask),
                        "block_sparsity": {b: float(v) for b, v in want.items()}})  # fmt: skip
    return out


def _run_check(golden_path: Path, js_root: Path = JS_ROOT) -> subprocess.CompletedProcess:
    return subprocess.run(
        [NODE, str(CHECK), str(golden_path), "--js", str(js_root)],
        capture_output=True,
        text=True,
        timeout=300,
    )


def _write(golden: dict, path: Path) -> Path:
    path.write_text(json.dumps(golden, allow_nan=False))
    return path


needs_node = pytest.mark.skipif(
    NODE is None, reason="node is not installed: the JS twins are checked under node (CI has it)"
)


def test_golden_covers_the_edge_cases(golden):
    """The data the check relies on is there: n = 1, 2, odd and even; causal and bidirectional;
    every method with masks and with rejections; odd and even windows, 0 and the widest; globals
    on and off; top_k = B; stride = n; bad raw values rejected and strings coerced."""
    heads = golden["heads"]
    assert {h["n"] for h in heads} >= {1, 2, 9, 14, 21}
    assert {h["causal"] for h in heads} == {False, True}
    cases = [(h, c) for h in heads for c in h["cases"]]
    for name in METHODS:
        assert any(c["method"] == name and "mask" in c for _, c in cases), name
    assert any(c["method"] == "sf-kmeans" and "rejected" in c for h, c in cases if h["artefact"])
    assert any(c["method"] == "fixed" and "rejected" in c for _, c in cases)  # c > stride
    assert any(c["method"] == "sf-distance" and "rejected" in c for h, c in cases
               if not h["artefact"])  # fmt: skip
    windows = {c["params"].get("window") for _, c in cases if "mask" in c}
    assert {0, 1, 2, 3, 4} <= windows
    assert any(c["params"].get("window") == 2 * h["n"] - 1 for h, c in cases if h["n"] > 2)
    assert {c["params"].get("globals") for _, c in cases} >= {True, False}
    assert any(c["params"].get("top_k") == c["params"].get("n_clusters") and "mask" in c
               for _, c in cases)  # fmt: skip
    assert any(c["params"].get("stride") == h["n"] and "mask" in c for h, c in cases)
    assert sum(len(h["pareto"]["points"]) for h in heads) > 1000
    co = golden["coercion"]
    assert {c["spec"]["kind"] for c in co} == {"int", "float", "choice", "bool"}
    assert any("rejected" in c for c in co) and any("value" in c for c in co)
    assert any(isinstance(c["raw"], str) and "value" in c for c in co)
    # the masks really differ between settings (a constant twin could not pass)
    assert len({c["mask"] for _, c in cases if "mask" in c}) > 500


@needs_node
def test_js_twins_equal_python(golden, tmp_path):
    """methods.js, patterns.js, metrics.js, rng.js and params.js give, cell for cell and to the
    last bit, what sparse_core gives for the same payloads and settings."""
    keep = os.environ.get("SPARSESCOPE_TWINS_GOLDEN")
    path = _write(golden, Path(keep) if keep else tmp_path / "golden.json")
    res = _run_check(path)
    assert res.returncode == 0, f"{res.stdout[-6000:]}\n{res.stderr[-3000:]}\n(golden: {path})"
    assert "0 mismatches" in res.stdout


def _drift(tmp_path: Path, module: str, old: str, new: str) -> Path:
    """A copy of frontend/js with one edit in one module (a drifted twin)."""
    root = tmp_path / "js"
    shutil.copytree(JS_ROOT, root)
    src = (root / module).read_text()
    assert src.count(old) == 1, f"{module} no longer contains {old!r}: update this test"
    (root / module).write_text(src.replace(old, new))
    return root


@needs_node
@pytest.mark.parametrize(
    ("module", "old", "new", "expect"),
    [
        # an even window acting as w - 1 instead of w + 1
        ("patterns.js", "const h = Math.floor(width / 2);", "const h = Math.ceil(width / 2) - 1;",
         "mask differs at (i="),
        # sparsity against n² even when causal
        ("metrics.js", "const validCount = causal ? (n * (n + 1)) / 2 : n * n;",
         "const validCount = n * n;", "metrics.sparsity"),
        # ragged last tiles left out of block sparsity
        ("metrics.js", "const t = Math.ceil(n / b);", "const t = Math.max(1, Math.floor(n / b));",
         "block_sparsity."),
        # a method missing from the JS registry
        ("methods.js", '  routing: (h, p) => routing(h, p.n_clusters),\n', "",
         "registry: missing predictor for routing"),
        # "yes" read as false
        ("params.js", 'const TRUE_WORDS = ["true", "1", "yes", "on"];',
         'const TRUE_WORDS = ["true", "1", "on"];', 'coercion: globals'),
        # XAttention without the reference's causal sink block (block 0 forced)
        ("arena.js", "const forced = (b) => b === a || (causal && b === 0);",
         "const forced = (b) => b === a;", "method=xattention"),
        # H2O's bidirectional mass with the query's own attention left in
        ("arena.js", "A[i * n + j] = f(total[j] - probs[i * n + j]);", "A[i * n + j] = total[j];",
         "method=h2o"),
        # mass recall over n² instead of n
        ("metrics.js", "if (probs) out.mass_recall = n > 0 ? mass / n : 1.0;",
         "if (probs) out.mass_recall = n > 0 ? mass / (n * n) : 1.0;", "mass_recall"),
    ],
    ids=["window", "sparsity", "blocks", "registry", "coercion", "xattention", "h2o-own-row",
         "mass-recall"],
)  # fmt: skip
def test_the_check_fails_on_a_drifted_twin(golden, tmp_path, module, old, new, expect):
    """The node check is not vacuous: one drifted line in one twin fails it, and the report names
    what differs (method, params, n, causal and the first differing cell for masks)."""
    path = _write(golden, tmp_path / "golden.json")
    res = _run_check(path, _drift(tmp_path, module, old, new))
    assert res.returncode == 1, res.stdout[-3000:]
    assert expect in res.stdout, res.stdout[-3000:]
    if "mask differs" in expect:
        line = next(ln for ln in res.stdout.splitlines() if "mask differs" in ln)
        for part in ("method=", "params=", "n=", "causal="):
            assert part in line, line


@needs_node
def test_the_check_reports_a_changed_golden_cell(golden, tmp_path):
    """Flip one cell of one expected mask: exactly that case fails, at that cell."""
    data = json.loads(json.dumps(golden))
    head = next(h for h in data["heads"] if h["n"] == 9)
    case = next(c for c in head["cases"] if c["method"] == "strided" and "mask" in c)
    k = 9 * 4 + 2  # (i = 4, j = 2)
    flipped = "0" if case["mask"][k] == "1" else "1"
    case["mask"] = case["mask"][:k] + flipped + case["mask"][k + 1 :]
    res = _run_check(_write(data, tmp_path / "golden.json"))
    assert res.returncode == 1
    lines = [ln for ln in res.stdout.splitlines() if "mask differs" in ln]
    assert len(lines) == 1 and "method=strided" in lines[0] and "(i=4, j=2)" in lines[0], lines


@needs_node
def test_the_check_refuses_a_golden_file_of_another_format(tmp_path):
    path = tmp_path / "golden.json"
    path.write_text(json.dumps({"format": "something-else/9"}))
    res = _run_check(path)
    assert res.returncode == 2 and "sparsescope-twins/1" in res.stderr
