"""Several models in one server: an encoder and a decoder served side by side.

Two tiny random checkpoints (BERT, GPT-2) are written in the Hugging Face layout and served by
directory, as ``sparsescope serve --model A --model B`` does; nothing is downloaded.
"""

from __future__ import annotations

import json
import re

import pytest
from fastapi.testclient import TestClient

from sparse_core.testing import write_tiny_checkpoint
from sparsescope.cli import main
from sparsescope.engine.service import AnalysisService
from sparsescope.engine.settings import Settings
from sparsescope.web.main import create_app

TEXT = "The chef who ran to the store was out of food."
LONG = " ".join(["The river ran past the old mill and the miller watched it."] * 12)
CORPUS = [
    "The river ran past the old mill, and the miller watched it every morning.",
    "Children played near the water while their parents talked about the harvest.",
    "In winter the wheel froze, so the village ground its grain by hand.",
    "A travelling merchant brought salt, cloth and news from the capital.",
    "He said the king would visit in spring, which nobody quite believed.",
    "When the king did come, the miller baked bread for the whole court.",
]
ISLAND_RE = re.compile(r'<script type="application/json" id="shared-state">(.*?)</script>', re.S)


@pytest.fixture(scope="module")
def model_dirs(tmp_path_factory):
    root = tmp_path_factory.mktemp("models")
    enc = write_tiny_checkpoint(root / "tiny-enc", "bert", seed=1, max_positions=64)
    dec = write_tiny_checkpoint(root / "tiny-dec", "gpt2", seed=2, max_positions=64)
    return enc, dec


def serve(data_dir, *models, **kw) -> TestClient:
    settings = Settings(data_dir=data_dir, models=tuple(str(m) for m in models), warmup=False, **kw)
    return TestClient(create_app(settings, AnalysisService(settings)))


def analyze(c: TestClient, **body) -> dict:
    r = c.post("/api/analyze", json={"text": TEXT, **body})
    assert r.status_code == 200, r.text
    return r.json()


def test_models_lists_every_served_model_default_first(tmp_path, model_dirs):
    with serve(tmp_path, *model_dirs) as c:
        got = c.get("/api/models").json()
        assert got["default"] == "tiny-enc"
        by_id = {m["id"]: m for m in got["models"]}
        assert [m["id"] for m in got["models"]] == ["tiny-enc", "tiny-dec"]
        enc, dec = by_id["tiny-enc"], by_id["tiny-dec"]
        assert (enc["model_type"], enc["decoder"], dec["model_type"], dec["decoder"]) == (
            "bert",
            False,
            "gpt2",
            True,
        )
        assert enc["layers"] == 2 and enc["heads"] == 4 and enc["kv_heads"] == 4
        assert enc["max_tokens"] == 64 and enc["device"] == "cpu"
        assert enc["artefacts"] == [] and dec["artefacts"] == []
        health = c.get("/healthz").json()
        assert health["model"] == "tiny-enc" and health["models"] == ["tiny-enc", "tiny-dec"]


def test_start_warms_every_served_model(tmp_path, model_dirs):
    """No model's first analysis pays its first forward: start-up runs each once."""
    settings = Settings(data_dir=tmp_path, models=tuple(str(m) for m in model_dirs), warmup=True)
    service = AnalysisService(settings)
    ran: list[str] = []
    service.start()
    assert service.stats.warmups == 2
    for slot in service.slots.values():
        real = slot.model.run
        slot.model.run = lambda *a, _real=real, _id=slot.id, **k: ran.append(_id) or _real(*a, **k)
    service.warmup()
    assert sorted(ran) == ["tiny-dec", "tiny-enc"]


def test_analyses_run_on_the_model_they_name(tmp_path, model_dirs):
    with serve(tmp_path, *model_dirs) as c:
        default = analyze(c)
        enc = analyze(c, model="tiny-enc")
        dec = analyze(c, model="tiny-dec")
        assert default["id"] == enc["id"] and default["model"] == "tiny-enc"
        assert dec["model"] == "tiny-dec" and dec["id"] != enc["id"]
        # the decoder is causal whatever was asked; the encoder as asked
        assert (dec["causal"], dec["decoder"]) == (True, True)
        assert (enc["causal"], enc["decoder"]) == (False, False)
        # the byte-level tokenizer is not GPT-2's here (the tiny checkpoints share MiniLM's),
        # but the decoder's graph never looks forward
        head = c.get(f"/api/analyses/{dec['id']}/heads/1/2").json()
        assert head["edges"] and all(j <= i for i, j, _ in head["edges"])
        enc_head = c.get(f"/api/analyses/{enc['id']}/heads/1/2").json()
        assert any(j > i for i, j, _ in enc_head["edges"])
        methods = c.get("/api/methods", params={"n": 12, "model": "tiny-dec"})
        assert methods.status_code == 200 and methods.json()["methods"]
        # each with its family (the page's picker groups and plot hues)
        fams = {m["name"]: (m["family"], m["family_label"]) for m in methods.json()["methods"]}
        assert fams["window"] == ("sparse-transformer", "Sparse Transformer")
        assert fams["h2o"][0] == "predictors" and fams["topk"][0] == "oracles"


def test_unknown_model_is_a_422_naming_the_served_ones(tmp_path, model_dirs):
    with serve(tmp_path, *model_dirs) as c:
        r = c.post("/api/analyze", json={"text": TEXT, "model": "gpt-9"})
        assert r.status_code == 422
        body = r.json()
        assert body["field"] == "model"
        assert "gpt-9" in body["detail"] and "tiny-enc, tiny-dec" in body["detail"]
        # a share's state is checked like an analysis; its fields are named by their path
        r = c.post("/api/share", json={"state": {"text": TEXT, "model": "gpt-9"}})
        assert r.status_code == 422 and r.json()["field"] == "state.model"
        assert "gpt-9" in r.json()["detail"] and "tiny-enc, tiny-dec" in r.json()["detail"]


def test_long_text_is_analysed_in_windows(tmp_path, model_dirs):
    with serve(tmp_path, model_dirs[0]) as c:
        r = c.post("/api/analyze", json={"text": LONG})
        assert r.status_code == 400 and r.json()["field"] == "text"
        assert "truncate=true" in r.json()["detail"]
        first = analyze(c, text=LONG, truncate=True)
        assert first["n"] == 64 and first["truncated"] is True
        total = first["total_tokens"]
        assert total > 62 and (first["window_start"], first["window_end"]) == (0, 62)
        later = analyze(c, text=LONG, truncate=True, start=40)
        assert later["id"] != first["id"] and later["total_tokens"] == total
        ws, we = later["window_start"], later["window_end"]
        assert 0 < ws <= 40 and we - ws == 62
        # the window starts at a word: its first token is where a word starts in the text
        starts = {m.start() for m in re.finditer(r"\S+", LONG)}
        first_tok = later["tokens"][1]
        assert first_tok["start"] in starts
        # past the end: the last full window
        end = analyze(c, text=LONG, truncate=True, start=10_000)
        assert end["window_end"] == total and end["window_start"] == total - 62
        # a text that fits has one window, whatever start says
        short = analyze(c, truncate=True, start=5)
        assert short["window_start"] == 0 and short["truncated"] is False
        assert short["id"] == analyze(c, truncate=True)["id"]


def test_a_share_names_its_model_and_reopens_on_it_after_a_restart(tmp_path, model_dirs):
    with serve(tmp_path, *model_dirs) as c:
        sid = c.post(
            "/api/share", json={"state": {"text": TEXT, "model": "tiny-dec", "layer": 1}}
        ).json()["id"]
        default_sid = c.post("/api/share", json={"state": {"text": TEXT}}).json()["id"]
        assert c.get(f"/api/share/{default_sid}").json()["state"]["model"] == "tiny-enc"
    # a new server process on the same data dir, the decoder now first
    with serve(tmp_path, model_dirs[1], model_dirs[0]) as c:
        page = c.get(f"/s/{sid}")
        assert page.status_code == 200
        island = json.loads(ISLAND_RE.search(page.text).group(1))
        assert island["state"]["model"] == "tiny-dec" and island["analysis"]
        assert c.get(f"/api/analyses/{island['analysis']}").json()["model"] == "tiny-dec"
        # the default-model share still opens on the model it was made with
        island = json.loads(ISLAND_RE.search(c.get(f"/s/{default_sid}").text).group(1))
        assert c.get(f"/api/analyses/{island['analysis']}").json()["model"] == "tiny-enc"
    # a server without that model says so instead of showing another model's graphs
    with serve(tmp_path, model_dirs[0]) as c:
        page = c.get(f"/s/{sid}")
        assert page.status_code == 422
        assert "tiny-dec" in page.text and "not served here" in page.text


def test_fit_for_a_new_model_gives_it_learned_methods(tmp_path, model_dirs, capsys):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n\n".join(CORPUS) + "\n", encoding="utf-8")
    arts = tmp_path / "artefacts"  # the server's default artefact dir under data_dir
    dec = str(model_dirs[1])
    code = main(
        ["fit", "--model", dec, "--corpus", str(corpus), "--out", str(arts), "--epochs", "1",
         "--max-tokens", "32", "--valid-fraction", "0.25"]
    )  # fmt: skip
    assert code == 0
    assert "--artefact-dir" in capsys.readouterr().out
    assert sorted(p.name for p in arts.iterdir()) == [
        "sparsefinder-tiny-dec-a1.5.json",
        "sparsefinder-tiny-dec-a1.5.safetensors",
    ]
    with serve(tmp_path, *model_dirs) as c:
        by_id = {m["id"]: m for m in c.get("/api/models").json()["models"]}
        assert by_id["tiny-dec"]["artefacts"] == [1.5] and by_id["tiny-enc"]["artefacts"] == []
        dec_a = analyze(c, model="tiny-dec")
        enc_a = analyze(c, model="tiny-enc")
        assert dec_a["artefact"] == "sparsefinder-tiny-dec-a1.5" and enc_a["artefact"] is None
        names = {m["name"] for m in dec_a["methods"]}
        assert {"sf-distance", "sf-quantization", "sf-kmeans"} <= names
        enc_names = set(enc_a["summary"][0]["methods"])  # what runs without an artefact
        assert not {"sf-distance", "sf-kmeans"} & enc_names
        assert {"window", "bigbird", "longformer", "fixed", "strided", "reformer", "routing"} <= (
            enc_names
        )
        r = c.get(f"/api/analyses/{dec_a['id']}/metrics/0/1", params={"method": "sf-kmeans"})
        assert r.status_code == 200, r.text
        assert 0.0 <= r.json()["recall"] <= 1.0
        # at another alpha there is no artefact for it
        assert analyze(c, model="tiny-dec", alpha=1.2)["artefact"] is None


def test_models_come_from_flags_and_the_environment(model_dirs):
    from sparsescope.commands.serve import settings_from_args

    a, b = (str(d) for d in model_dirs)
    s = Settings.from_env({"SPARSESCOPE_MODELS": f"{a}, {b}"})
    assert s.models == (a, b) and s.model_names() == [a, b]
    assert Settings.from_env({}).model_names() == [None]
    import argparse

    from sparsescope.commands import serve as serve_cmd

    p = argparse.ArgumentParser()
    serve_cmd.add_parser(p.add_subparsers())
    args = p.parse_args(["serve", "--model", b, "--model", a, "--max-tokens", "128"])
    s = settings_from_args(args)
    assert s.models == (b, a) and s.max_tokens == 128
    with pytest.raises(Exception, match="given twice"):
        Settings(models=(a, a))


@pytest.mark.parametrize(
    ("make", "needle"),
    [
        ("unsupported", "model_type"),
        ("no-tokenizer", "tokenizer"),
        ("missing", "does not exist"),
    ],
)
def test_serve_refuses_a_bad_model_in_one_line(tmp_path, model_dirs, capsys, make, needle):
    import shutil

    bad = tmp_path / make
    if make == "unsupported":
        shutil.copytree(model_dirs[0], bad)
        cfg = json.loads((bad / "config.json").read_text())
        (bad / "config.json").write_text(json.dumps({**cfg, "model_type": "wav2vec2"}))
    elif make == "no-tokenizer":
        shutil.copytree(model_dirs[0], bad)
        for f in bad.iterdir():
            if "tokenizer" in f.name or f.name == "vocab.txt":
                f.unlink()
    code = main(["serve", "--model", str(model_dirs[0]), "--model", str(bad),
                 "--data-dir", str(tmp_path / "data")])  # fmt: skip
    err = capsys.readouterr().err.strip()
    assert code == 2
    assert len(err.splitlines()) == 1 and needle in err, err


def test_cli_analyze_runs_any_model_directory(model_dirs, capsys):
    code = main(["analyze", "--model", str(model_dirs[1]), "--json", TEXT])
    assert code == 0
    report = json.loads(capsys.readouterr().out)
    assert report["model"] == "tiny-dec" and report["causal"] is True
    assert report["decoder"] is True
    assert {"reformer", "routing", "window"} <= set(report["heads"][0]["patterns"])


def test_models_carry_a_card(tmp_path, model_dirs):
    """Each served model has a card: a friendly label, what it is, and the competence fields
    (null where nothing was measured for it, as for these tiny checkpoints)."""
    with serve(tmp_path, *model_dirs) as c:
        got = c.get("/api/models").json()
    for m in got["models"]:
        cardj = m["card"]
        assert cardj["id"] == m["id"]
        assert cardj["label"] == f"{m['id']}, softmax-trained; entmax applied"
        assert cardj["attention_training"] == "softmax" and cardj["alpha"] is None
        assert cardj["measured"] is False
        for k in ("sts_spearman", "sts_spearman_softmax", "mlm_loss", "mlm_unigram_loss"):
            assert k in cardj and cardj[k] is None
