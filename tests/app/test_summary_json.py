"""The analyze body written straight to JSON (app/engine/payloads.py ``summary_json`` and
``analysis_json``): byte for byte what ``dumps`` makes of the body with its summary rows, and
the cache entry's ``body`` parsed back from those bytes is the dict the rows would have made."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from sparse_core.methods import PredictContext
from sparsescope.engine.payloads import (
    _rows,
    analysis_body,
    analysis_json,
    dumps,
    summaries,
    summary_json,
    summary_rows,
    summary_texts,
)
from sparsescope.engine.request import AnalysisRequest
from sparsescope.engine.service import AnalysisService
from tests.app.conftest import make_settings

NAMES = ["window", "sf-kmeans", 'odd "name" 100%', "longformer", "ünï"]


def random_tables(seed: int):
    """Figures as the summary holds them, with the awkward cases of float formatting: values
    under 1e-4 (written with an exponent), exact sixths (rounding ties), 0, 1, and values
    outside [0, 1]."""
    rng = np.random.default_rng(seed)
    L, H = int(rng.integers(1, 7)), int(rng.integers(1, 13))

    def figures():
        a = rng.random((L, H))
        kind = seed % 6
        if kind == 1:
            a = a * 1e-4
        elif kind == 2:
            a = np.round(a * 8) / 8
        elif kind == 3:
            a = rng.integers(0, 1_000_001, (L, H)) / 1e6
        elif kind == 4:
            a = np.where(a < 0.3, 0.0, np.where(a < 0.6, 1.0, a * 1e-6 * rng.integers(1, 300)))
        elif kind == 5:
            a = (a - 0.5) * 3000 + 0.0000005
        return a

    names = NAMES[: 1 + seed % len(NAMES)]
    return figures(), {nm: {"recall": figures(), "sparsity": figures()} for nm in names}


@pytest.mark.parametrize("seed", range(60))
def test_summary_json_is_dumps_of_the_rows(seed):
    gold, tables = random_tables(seed)
    assert summary_json(gold, tables).encode() == dumps(_rows(gold, tables))


def test_summary_json_refuses_what_dumps_refuses():
    gold, tables = random_tables(0)
    gold[0, 0] = float("nan")
    with pytest.raises(ValueError):
        summary_json(gold, tables)


@pytest.mark.parametrize(
    "body",
    [
        {"id": "x", "tokens": [{"text": "é\u2028<"}], "summary": None, "methods": [1], "k": {}},
        {"summary": None},
        {"summary": None, "after": 1},
        {"before": [None, True], "summary": None},
    ],
)
def test_analysis_json_is_dumps_of_the_body(body):
    gold, tables = random_tables(3)
    want = dumps({**body, "summary": _rows(gold, tables)})
    assert analysis_json(body, summary_json(gold, tables)) == want


def test_summary_texts_of_real_runs_equal_the_rows_one_by_one(tiny_model, tiny_artefact):
    """Texts of several lengths, summarised together, give each text's own rows (alone)."""
    texts = [" ".join(["word"] * k) + "." for k in (1, 2, 2, 5, 9, 9, 9, 14)]
    outs = [tiny_model.run(t, causal=k % 2 == 1) for k, t in enumerate(texts)]
    with torch.inference_mode():
        ctxs = [PredictContext.from_run(o, tiny_artefact) for o in outs]
    together = summary_texts(ctxs)
    assert [json.loads(t) for t in together] == summaries(ctxs)
    for out, ctx, text in zip(outs, ctxs, together, strict=True):
        assert text.encode() == dumps(summary_rows(out, tiny_artefact, ctx))


def test_the_service_body_is_the_dumps_of_the_old_body(tmp_path, tiny_model, tiny_artefact):
    """The cached entry's bytes equal ``dumps`` of the body built with the summary rows, and
    ``Entry.body`` (parsed back when a route asks) is that same dict."""
    svc = AnalysisService(make_settings(tmp_path), model=tiny_model, artefact=tiny_artefact)
    for k, text in enumerate(["The chef who ran to the store.", "One.", "Two words here!"]):
        entry = svc.analyze_entry(AnalysisRequest(text, 1.5, bool(k % 2), False))
        assert entry.body_dict is None  # nothing parsed yet
        out, art = entry.out, entry.artefact
        rows = summary_rows(out, art, PredictContext.from_run(out, art))
        body = analysis_body(
            entry.id,
            out,
            model_id=svc.slot.id,
            device=svc.model.device,
            alpha=1.5,
            causal=bool(k % 2),
            decoder=bool(svc.model.config.is_decoder),
            artefact_name=entry.artefact_name,
            pos=entry.pos,
            summary=rows,
            methods=svc.methods(out.n),
        )
        assert entry.body_json == dumps(body)
        assert entry.body == body and entry.body_dict is not None
