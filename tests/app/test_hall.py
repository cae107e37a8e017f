"""A lecture hall at once: batching, back-pressure, faults as errors, connections.

No timing assertions: every test waits for a state (a queued job, a dropped one) with a bounded
poll, and asserts what was answered and what ran.
"""

from __future__ import annotations

import json
import socket
import sqlite3
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest
import torch
from fastapi.testclient import TestClient

from sparse_core.runtime import SPLIT_MIN_ROWS
from sparsescope.engine.batching import Job, ModelWorker
from sparsescope.engine.limits import LOW, NORMAL, JobContext, RateLimiter
from sparsescope.engine.request import AnalysisRequest
from sparsescope.engine.service import AnalysisService
from sparsescope.engine.store import DB_NAME, ShareStore, ShareStoreError
from sparsescope.web.main import create_app
from sparsescope.web.schemas import MAX_ANALYZE_CHARS
from tests.app.conftest import make_settings

WAIT_S = 30.0  # bound of every poll below (a generous one: the machine is shared)


def wait_for(cond, what: str) -> None:
    deadline = time.monotonic() + WAIT_S
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"gave up waiting for {what}")
        time.sleep(0.01)


def same_length_texts(model, count: int, n_words: int = 6) -> list[str]:
    """``count`` distinct texts of one token length (they batch without padding)."""
    words = "the chef who ran to store was out of food so he went back home".split()
    by_len: dict[int, list[str]] = {}
    for i in range(400):
        text = " ".join(words[(i + k * 3) % len(words)] for k in range(n_words)) + f" {i}"
        by_len.setdefault(len(model.encode(text).ids), []).append(text)
        best = max(by_len.values(), key=len)
        if len(best) >= count:
            return best[:count]
    raise AssertionError("no texts of one length")


# ----------------------------------------------------------------------------- batching


@pytest.fixture
def one_thread():
    """One torch thread per forward (the server's default on a 2-core machine): then a batched
    forward is bit for bit a single one (with more threads, the BLAS kernels split a batch's
    rows differently from one text's: equal up to float rounding, about 1e-6)."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def test_batched_runs_equal_single_runs_exactly(tiny_model, one_thread):
    """Texts gathered into one forward give bit-for-bit what each gives alone."""
    texts = same_length_texts(tiny_model, 6)
    others = ["Hi.", "A rather longer sentence than the others, with commas, and more words."]
    worker = ModelWorker(tiny_model, window_s=0.5)  # a long window: they surely meet
    with ThreadPoolExecutor(len(texts) + 2) as pool:
        futures = [pool.submit(worker.run, AnalysisRequest(t), len(tiny_model.encode(t).ids))
                   for t in texts + others]  # fmt: skip
        outs = [f.result(timeout=WAIT_S) for f in futures]
    assert worker.stats.largest_batch >= 2  # really batched
    for text, out in zip(texts + others, outs, strict=True):
        alone = tiny_model.run(text, alpha=1.5)
        for name in ("probs", "queries", "keys", "hidden", "graph"):
            assert torch.equal(getattr(out, name), getattr(alone, name)), (text, name)
        assert out.tokens == alone.tokens


def test_texts_of_different_lengths_share_a_forward_exactly(tiny_model, one_thread):
    """Texts of different lengths are packed into one forward, each bit for bit its single run."""
    texts = [f"Text {i}: " + " ".join(["word"] * (1 + 2 * i)) + "." for i in range(8)]
    assert len({len(tiny_model.encode(t).ids) for t in texts}) == 8
    worker = ModelWorker(tiny_model, window_s=0.5)
    with ThreadPoolExecutor(len(texts)) as pool:
        futures = [pool.submit(worker.run, AnalysisRequest(t), len(tiny_model.encode(t).ids))
                   for t in texts]  # fmt: skip
        outs = [f.result(timeout=WAIT_S) for f in futures]
    assert worker.stats.largest_batch >= 4  # different lengths, one forward
    for text, out in zip(texts, outs, strict=True):
        alone = tiny_model.run(text, alpha=1.5)
        for name in ("probs", "queries", "keys", "hidden", "graph"):
            assert torch.equal(getattr(out, name), getattr(alone, name)), (text, name)


def test_a_large_forward_split_side_by_side_equals_single_runs(tiny_model, one_thread):
    """A round of many texts runs as two packed forwards side by side (one per core); every
    text is still bit for bit its single run, and the summaries' hook sees the round whole."""
    texts = [f"Text {i}: " + " ".join(["word", "token"] * (8 + i)) + "." for i in range(12)]
    lengths = [len(tiny_model.encode(t).ids) for t in texts]
    assert sum(lengths) >= 2 * 128 and len(texts) >= 2 * 4  # large enough to split
    worker = ModelWorker(tiny_model, window_s=0, split=2)
    seen = []
    worker.after_batch = lambda jobs, outs: seen.append(len(jobs))
    jobs = [Job(AnalysisRequest(t), n, JobContext()) for t, n in zip(texts, lengths, strict=True)]
    worker._run_round(jobs)  # what the worker does with a round of these jobs
    assert worker.stats.split == (worker.split > 1) and seen == [len(texts)]  # one core: 1 part
    for text, job in zip(texts, jobs, strict=True):
        out, alone = job.future.result(timeout=WAIT_S), tiny_model.run(text, alpha=1.5)
        for name in ("probs", "queries", "keys", "hidden", "graph"):
            assert torch.equal(getattr(out, name), getattr(alone, name)), (text, name)
    small = ModelWorker(tiny_model, window_s=0, split=2)  # a small round: one forward
    few = [Job(AnalysisRequest(texts[k]), lengths[k], JobContext()) for k in range(3)]
    small._run_round(few)
    assert small.stats.split == 0
    assert [j.future.result(timeout=WAIT_S).n for j in few] == lengths[:3]


@pytest.mark.parametrize("alpha", [1.0, 1.25, 1.5, 2.0])
def test_a_lone_analysis_on_two_cores_equals_its_batched_and_single_runs(
    tiny_model, one_thread, alpha
):
    """A text alone in its round runs on both cores (half of every linear layer's rows and of
    every layer's heads on a second worker), bit for bit its single run on one
    thread and its run batched with others."""
    text = "The chef who ran to the store was out of food, so he went back. " * 6
    n = len(tiny_model.encode(text).ids)
    assert n >= 2 * SPLIT_MIN_ROWS  # long enough for the linear layers to split
    worker = ModelWorker(tiny_model, window_s=0, split=2)
    job = Job(AnalysisRequest(text, alpha=alpha), n, JobContext())
    worker._run_round([job])
    out = job.future.result(timeout=WAIT_S)
    assert worker._lone is not None  # the second worker was used
    alone = tiny_model.run(text, alpha=alpha)
    batched = tiny_model.run_batch([text, "Another text to batch with, a bit shorter."], alpha)[0]
    for name in ("probs", "queries", "keys", "hidden", "graph"):
        assert torch.equal(getattr(out, name), getattr(alone, name)), name
        assert torch.equal(getattr(out, name), getattr(batched, name)), name


def test_arrivals_extend_the_gathering_window_up_to_its_most():
    """An idle worker waits ``window_s`` for company, and each arrival extends that wait, up to
    ``max_window_s`` after the first: texts coming one after another within the window share a
    forward even when they span more than one window; a text after the most runs later."""
    batches: list[list[str]] = []

    def run_many(jobs):
        batches.append([j.request.text for j in jobs])
        return [j.request.text for j in jobs]

    def run_one(job):
        batches.append([job.request.text])
        return job.request.text

    # window 2 s, at most 3 s: A at 0, B at ~1.2, C at ~2.4 (past A's own window, within
    # B's extension and the most), D at ~3.6 (past the most); 0.6 s of slack either side, so
    # a loaded machine's late wake-ups do not change the groups
    worker = ModelWorker(None, window_s=2.0, max_window_s=3.0, run_one=run_one, run_many=run_many)
    futures = []
    for text in "ABCD":
        futures.append(worker.submit_request(AnalysisRequest(text), 5))
        if text != "D":
            time.sleep(1.2)
    assert [f.result(timeout=WAIT_S) for f in futures] == list("ABCD")
    assert batches == [["A", "B", "C"], ["D"]]
    # without extensions (the default of the class): one window, then what came later
    batches.clear()
    plain = ModelWorker(None, window_s=1.0, run_one=run_one, run_many=run_many)
    first = plain.submit_request(AnalysisRequest("A"), 5)
    time.sleep(0.5)
    second = plain.submit_request(AnalysisRequest("B"), 5)
    time.sleep(1.0)  # past the first window: the worker has taken what it had
    third = plain.submit_request(AnalysisRequest("C"), 5)
    for f in (first, second, third):
        f.result(timeout=WAIT_S)
    assert batches[0] == ["A", "B"] and ["C"] in batches


def test_piped_pos_tagging_equals_one_text_at_a_time():
    """The tagger pipes the texts waiting together (nlp.pipe): on ~600 texts of 1 to 120 words
    (punctuation, digits, abbreviations), in batches of 7 and 64, every text's tok2vec output is
    bit for bit its own call's, so its words and tags are the same."""
    import random

    import numpy as np

    from sparse_core import pos

    rng = random.Random(13)
    vocab = (
        "the chef who ran to store was out of food so he went back home Dr. Smith's cat "
        "(aged 3) ran fast , ! ? 2 + 4 = 6 I am what New York they're can't e.g. well"
    ).split()
    texts = ["Hi", "Ok.", "a", "What?", "I am."] + [
        " ".join(rng.choices(vocab, k=rng.choice([2, 5, 9, 14, 30, 120]))) for _ in range(600)
    ]
    nlp = pos.tagger()
    alone = [nlp(t) for t in texts]
    for batch in (7, 64):
        for a, b in zip(alone, nlp.pipe(texts, batch_size=batch), strict=True):
            assert np.array_equal(a.tensor, b.tensor), a.text
            assert [t.pos_ for t in a] == [t.pos_ for t in b], a.text
    assert pos.word_tags_many(texts[:50], batch_size=64) == [pos.word_tags(t) for t in texts[:50]]


def test_tagger_pipes_the_texts_that_wait_together():
    from sparsescope.engine.tagging import Tagger

    tagger = Tagger()
    model_like = type("Enc", (), {})
    texts = [f"The chef number {i} ran to the store." for i in range(12)]
    encs = []
    for t in texts:
        e = model_like()
        e.offsets, e.special = [(0, len(t))], [False]
        encs.append(e)
    blocker = threading.Event()
    tagger._pool.submit(blocker.wait)  # the tagging thread is busy: the texts pile up
    futures = [tagger.start(t, e) for t, e in zip(texts, encs, strict=True)]
    blocker.set()
    words = [f.result(timeout=WAIT_S) for f in futures]
    assert tagger.calls == 1  # one pipe for all twelve
    from sparse_core import pos

    assert words == [pos.word_tags(t) for t in texts]
    alone = Tagger(pipe=False)  # batching off: one text a call
    alone._pool.submit(blocker.wait)
    assert [
        alone.start(t, e).result(timeout=WAIT_S) for t, e in zip(texts, encs, strict=True)
    ] == words
    assert alone.calls == len(texts)


@pytest.mark.parametrize("with_artefact", [False, True], ids=["no-artefact", "artefact"])
def test_api_answers_are_the_same_batched_or_alone(
    tmp_path, tiny_model, tiny_artefact, one_thread, with_artefact
):
    """The whole analyze body (the per-head summary included, which a batch computes for its
    texts at once) and the first head's payload and Pareto data are the same batched or alone."""
    texts = same_length_texts(tiny_model, 5)
    art = {"artefact": tiny_artefact} if with_artefact else {}
    settings = make_settings(tmp_path, batch_window_ms=300)
    svc = AnalysisService(settings, model=tiny_model, **art)
    with TestClient(create_app(settings, svc)) as c, ThreadPoolExecutor(5) as pool:
        batched = list(pool.map(lambda t: c.post("/api/analyze", json={"text": t}), texts))
        follow = [
            (c.get(f"/api/analyses/{r.json()['id']}/heads/1/2").json(),
             c.get(f"/api/analyses/{r.json()['id']}/pareto?layer=1&head=2").json())
            for r in batched
        ]  # fmt: skip
    worker = svc.slot.worker
    assert worker.stats.largest_batch >= 2
    assert svc.stats.summary_batches >= 1  # summarised together
    if with_artefact:
        assert "sf-kmeans" in batched[0].json()["summary"][0]["methods"]
    alone_settings = make_settings(tmp_path / "alone")
    alone_svc = AnalysisService(alone_settings, model=tiny_model, **art)
    with TestClient(create_app(alone_settings, alone_svc)) as c:
        for text, r, (head, pareto) in zip(texts, batched, follow, strict=True):
            assert r.status_code == 200
            assert c.post("/api/analyze", json={"text": text}).json() == r.json()
            assert c.get(f"/api/analyses/{r.json()['id']}/heads/1/2").json() == head
            assert c.get(f"/api/analyses/{r.json()['id']}/pareto?layer=1&head=2").json() == pareto
    assert alone_svc.stats.summary_batches == 0


# ----------------------------------------------------------------------------- back-pressure


def test_a_full_queue_answers_503_with_retry_after(tmp_path, tiny_model):
    settings = make_settings(tmp_path, queue_tokens=30, batch_window_ms=0)
    svc = AnalysisService(settings, model=tiny_model)
    texts = [f"Text number {i} has a few words in it." for i in range(8)]
    with TestClient(create_app(settings, svc)) as c:
        svc.slot.lock.acquire()  # the model is busy: the worker waits at its first forward
        try:
            with ThreadPoolExecutor(len(texts)) as pool:
                futures = [pool.submit(c.post, "/api/analyze", json={"text": t}) for t in texts]
                wait_for(lambda: any(f.done() for f in futures), "a refusal")
                svc.slot.lock.release()
                answers = [f.result(timeout=WAIT_S) for f in futures]
        finally:
            if svc.slot.lock.locked():
                svc.slot.lock.release()
    codes = sorted(r.status_code for r in answers)
    assert 200 in codes and 503 in codes, codes
    busy = next(r for r in answers if r.status_code == 503)
    body = busy.json()
    assert body["field"] is None and body["retry_after"] >= 1
    assert busy.headers["retry-after"] == str(body["retry_after"])
    assert "busy" in body["detail"] and "SPARSESCOPE_QUEUE_TOKENS" in body["detail"]
    assert svc.slot.worker.stats.refused >= 1


def test_the_rate_limit_answers_429_with_retry_after(tmp_path, tiny_model):
    settings = make_settings(tmp_path, rate_burst=3, rate_per_s=0.01)
    with TestClient(create_app(settings, AnalysisService(settings, model=tiny_model))) as c:
        codes = [c.post("/api/analyze", json={"text": f"Text {i}."}).status_code for i in range(5)]
        r = c.post("/api/analyze", json={"text": "One more."})
        assert c.get("/healthz").status_code == 200  # other routes are not limited
    assert codes == [200, 200, 200, 429, 429]
    body = r.json()
    assert r.status_code == 429 and body["field"] is None and body["retry_after"] >= 1
    assert r.headers["retry-after"] == str(body["retry_after"])
    assert "too many analyses" in body["detail"]


def test_the_default_rate_lets_a_lecture_hall_behind_one_address_through(tmp_path):
    settings = make_settings(tmp_path)
    limiter = RateLimiter(settings.rate_per_s, settings.rate_burst, "analyses", "x")
    for _ in range(48 * 3):  # 48 students, three analyses each, at the same instant
        limiter.take("10.0.0.1", now=100.0)
    limiter.take("10.0.0.2", now=100.0)  # another address has its own bucket


def test_48_simultaneous_analyses_from_one_address_are_served(tmp_path, tiny_model):
    settings = make_settings(tmp_path)
    svc = AnalysisService(settings, model=tiny_model)
    texts = [f"Student {i} analyses this sentence about attention." for i in range(48)]
    with TestClient(create_app(settings, svc)) as c, ThreadPoolExecutor(48) as pool:
        answers = list(pool.map(lambda t: c.post("/api/analyze", json={"text": t}), texts))
    assert [r.status_code for r in answers] == [200] * 48
    assert len({r.json()["id"] for r in answers}) == 48


def test_a_job_whose_client_is_gone_is_not_run(tiny_model):
    ran: list[str] = []
    worker = ModelWorker(tiny_model, window_s=0, run_one=lambda j: ran.append(j.request.text))
    worker.lock.acquire()
    blocker = Job(AnalysisRequest("first"), 3, JobContext(priority=NORMAL))
    worker.submit(blocker)
    wait_for(lambda: worker.waiting == 0, "the worker to take the first job")
    gone = Job(AnalysisRequest("gone"), 3, JobContext(priority=NORMAL))
    worker.submit(gone)
    gone.ctx.gone.set()  # the client hung up while it waited
    worker.lock.release()
    blocker.future.result(timeout=WAIT_S)
    with pytest.raises(Exception, match="disconnected"):
        gone.future.result(timeout=WAIT_S)
    assert ran == ["first"] and worker.stats.dropped_gone == 1


def test_a_disconnected_http_client_s_analysis_is_dropped(tmp_path, tiny_model):
    """End to end through uvicorn: the client of a queued analysis closes its socket; the model
    never runs its text."""
    import uvicorn

    from sparsescope.web.connections import uvicorn_options

    settings = make_settings(tmp_path, batch_window_ms=0)
    svc = AnalysisService(settings, model=tiny_model)
    app = create_app(settings, svc)
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", **uvicorn_options(settings)))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    wait_for(lambda: server.started, "the server")

    def post(text: str) -> socket.socket:
        body = json.dumps({"text": text}).encode()
        s = socket.create_connection(("127.0.0.1", port), timeout=WAIT_S)
        s.sendall(
            b"POST /api/analyze HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json"
            + f"\r\nContent-Length: {len(body)}\r\n\r\n".encode()
            + body
        )
        return s

    try:
        svc.slot.lock.acquire()
        first = post("The first text runs.")
        wait_for(lambda: getattr(svc.slot, "worker", None) is not None, "the worker")
        worker = svc.slot.worker
        wait_for(lambda: worker.waiting_tokens > 0 and worker.waiting == 0, "the first forward")
        second = post("The second client gives up.")
        wait_for(lambda: worker.waiting == 1, "the second job to queue")
        second.close()
        wait_for(lambda: worker._normal and worker._normal[0].ctx.gone.is_set(), "the hang-up")
        svc.slot.lock.release()
        assert first.recv(12) == b"HTTP/1.1 200"
        first.close()
        wait_for(lambda: worker.stats.dropped_gone == 1, "the drop")
        assert svc.stats.runs == 1 and worker.stats.forwards == 1
    finally:
        if svc.slot.lock.locked():
            svc.slot.lock.release()
        server.should_exit = True
        thread.join(timeout=WAIT_S)


def test_healthz_answers_while_every_model_thread_waits(tmp_path, tiny_model):
    settings = make_settings(tmp_path, batch_window_ms=0)
    svc = AnalysisService(settings, model=tiny_model)
    texts = [f"Waiting text {i}." for i in range(48)]
    tokens = sum(len(tiny_model.encode(t).ids) for t in texts)
    with TestClient(create_app(settings, svc)) as c, ThreadPoolExecutor(48) as pool:
        svc.slot.lock.acquire()
        try:
            futures = [pool.submit(c.post, "/api/analyze", json={"text": t}) for t in texts]
            # all 48 handed to the model worker (queued, or taken and waiting for the model)
            wait_for(lambda: getattr(svc.slot, "worker", None) is not None, "the worker")
            wait_for(lambda: svc.slot.worker.waiting_tokens == tokens, "the analyses to queue")
            assert c.get("/healthz").status_code == 200  # no thread of the pool needed
            assert c.get("/static/css/app.css").status_code == 200
        finally:  # before the pool's exit waits for the requests (they wait for the model)
            svc.slot.lock.release()
        assert all(f.result(timeout=WAIT_S).status_code == 200 for f in futures)


def test_healthz_needs_no_thread_of_the_default_pool(tmp_path, tiny_model):
    """Every thread of the default pool busy (plain routes, static files): /healthz still
    answers, its dependencies are async (a sync dependency would queue it
    behind the burst)."""
    import anyio.to_thread

    settings = make_settings(tmp_path)
    with TestClient(create_app(settings, AnalysisService(settings, model=tiny_model))) as c:
        release = threading.Event()

        async def occupy() -> None:
            anyio.to_thread.current_default_thread_limiter().total_tokens = 1
            await anyio.to_thread.run_sync(release.wait)

        c.portal.start_task_soon(occupy)
        answered: list[int] = []
        probe = threading.Thread(target=lambda: answered.append(c.get("/healthz").status_code))
        try:
            wait_for(
                lambda: (
                    c.portal.call(
                        lambda: anyio.to_thread.current_default_thread_limiter().borrowed_tokens
                    )
                    == 1
                ),
                "the pool's only thread to be taken",
            )
            probe.start()
            probe.join(timeout=WAIT_S)
            assert answered == [200], "/healthz waited for a thread of the default pool"
        finally:
            release.set()
            probe.join(timeout=WAIT_S)


# ----------------------------------------------------------------------------- shares


def test_shares_queue_no_unbounded_work(tmp_path, tiny_model):
    settings = make_settings(tmp_path, share_warmups=2)
    svc = AnalysisService(settings, model=tiny_model)
    with TestClient(create_app(settings, svc)) as c:
        warmups = c.app.state.limits.warmups
        svc.slot.lock.acquire()  # the model is busy: warm-ups cannot drain
        try:
            ids = []
            for i in range(30):
                r = c.post("/api/share", json={"state": {"text": f"A long shared text {i}. " * 20}})
                assert r.status_code == 200
                ids.append(r.json()["id"])
            assert warmups.pending <= 2 and warmups.skipped >= 27
            worker = getattr(svc.slot, "worker", None)
            assert worker is None or worker.waiting <= 1
        finally:
            svc.slot.lock.release()
        assert warmups.join()
        page = c.get(f"/s/{ids[-1]}")  # a skipped one is analysed on first open
        assert page.status_code == 200


def test_shutdown_drops_low_priority_work(tiny_model):
    worker = ModelWorker(tiny_model, window_s=0)
    worker.lock.acquire()
    jobs = [Job(AnalysisRequest(f"low {i}"), 400, JobContext(priority=LOW)) for i in range(5)]
    for job in jobs:
        worker.submit(job)
    wait_for(lambda: worker.waiting == 4, "the worker to take one (400 tokens: one a round)")
    assert worker.drop_low() == 4
    worker.lock.release()
    for job in jobs[1:]:
        with pytest.raises(Exception, match="shutting down"):
            job.future.result(timeout=WAIT_S)
    jobs[0].future.result(timeout=WAIT_S)


def test_share_storage_is_bounded_in_count(tmp_path, tiny_model):
    settings = make_settings(tmp_path, share_max_count=3)
    with TestClient(create_app(settings, AnalysisService(settings, model=tiny_model))) as c:
        codes = [c.post("/api/share", json={"state": {"text": f"t{i}"}}).status_code
                 for i in range(4)]  # fmt: skip
        r = c.post("/api/share", json={"state": {"text": "more"}})
    assert codes == [200, 200, 200, 507]
    assert r.status_code == 507 and "full" in r.json()["detail"]
    assert "SPARSESCOPE_SHARE_MAX_COUNT" in r.json()["detail"]


def test_share_storage_is_bounded_in_bytes(tmp_path):
    with ShareStore.in_dir(tmp_path, max_bytes=200) as store:
        store.create({"text": "x" * 100})
        with pytest.raises(ShareStoreError, match="SPARSESCOPE_SHARE_MAX_BYTES"):
            store.create({"text": "y" * 100})
    with ShareStore.in_dir(tmp_path, max_bytes=200) as store:  # the usage is counted on open
        assert store.usage["shares"] == 1 and store.usage["bytes"] > 100


def test_the_share_rate_is_limited_per_client(tmp_path, tiny_model):
    settings = make_settings(tmp_path, share_rate_burst=2, share_rate_per_s=0.01)
    with TestClient(create_app(settings, AnalysisService(settings, model=tiny_model))) as c:
        codes = [c.post("/api/share", json={"state": {"text": f"t{i}"}}).status_code
                 for i in range(3)]  # fmt: skip
    assert codes == [200, 200, 429]


@pytest.mark.parametrize(
    ("pragma", "status", "needle"),
    [("PRAGMA max_page_count = 1", 507, "disk"), ("PRAGMA query_only = ON", 503, "written")],
)
def test_a_full_or_read_only_data_dir_is_a_clear_error_and_reads_work(
    tmp_path, tiny_model, pragma, status, needle
):
    """Real SQLite refusals: a database that cannot grow (SQLITE_FULL, as on a full disk) and
    one that may not be written (SQLITE_READONLY, as on a read-only data dir)."""
    settings = make_settings(tmp_path)
    with TestClient(create_app(settings, AnalysisService(settings, model=tiny_model))) as c:
        sid = c.post("/api/share", json={"state": {"text": "saved before"}}).json()["id"]
        store = c.app.state.share_store
        if "max_page_count" in pragma:
            pages = store._conn.execute("PRAGMA page_count").fetchone()[0]
            pragma = f"PRAGMA max_page_count = {pages}"
        store._conn.execute(pragma)
        big = {"text": "word " * 3800, "truncate": True}  # analysable; needs new pages
        r = c.post("/api/share", json={"state": big})
        assert r.status_code == status, r.text
        body = r.json()
        assert needle in body["detail"] and "SPARSESCOPE_DATA_DIR" in body["detail"]
        assert str(tmp_path) not in body["detail"]
        assert c.get(f"/api/share/{sid}").status_code == 200  # reading keeps working
        assert c.get(f"/s/{sid}").status_code == 200


def test_a_foreign_database_is_byte_identical_after_a_refused_start(tmp_path, capsys):
    from bench.bench_load import free_port
    from sparsescope.cli import main

    path = tmp_path / DB_NAME
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE recipes (name TEXT)")
    conn.execute("INSERT INTO recipes VALUES ('soup')")
    conn.commit()
    conn.close()
    before = path.read_bytes()
    with pytest.raises(ShareStoreError):
        ShareStore(path)
    assert path.read_bytes() == before
    code = main(["serve", "--data-dir", str(tmp_path), "--port", str(free_port())])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "another program" in err
    assert "Traceback" not in err
    assert path.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == [DB_NAME]  # no -wal, no -shm


def test_a_port_in_use_is_one_line_and_exit_2(tmp_path, capsys):
    from sparsescope.cli import main

    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen(1)
    try:
        code = main(["serve", "--data-dir", str(tmp_path), "--port", str(taken.getsockname()[1])])
    finally:
        taken.close()
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "cannot listen" in err


# ----------------------------------------------------------------------------- faults as 4xx


def test_bad_inputs_are_4xx_naming_the_field(client):
    r = client.post("/api/analyze", json={"text": "a" * (MAX_ANALYZE_CHARS + 1)})
    assert r.status_code == 422 and r.json()["field"] == "text"
    assert f"{MAX_ANALYZE_CHARS:,}" in r.json()["detail"]
    for text in ("\u200b\u200b", "\x00\x01\x02", "\u200d\ufeff \u2060"):
        r = client.post("/api/analyze", json={"text": text})
        assert r.status_code == 400 and r.json()["field"] == "text", text
        assert "empty" in r.json()["detail"]
    deep = b'{"text":' + b"[" * 50_000 + b"]" * 50_000 + b"}"
    r = client.post("/api/analyze", content=deep, headers={"content-type": "application/json"})
    assert r.status_code == 422 and "nested too deeply" in r.json()["detail"]


@pytest.mark.parametrize("value", ["inf", "-inf", "1e400", "nan", "8.9"])
def test_non_finite_or_fractional_choice_parameters_are_4xx(art_client, value):
    aid = art_client.post("/api/analyze", json={"text": "The chef ran."}).json()["id"]
    r = art_client.get(
        f"/api/analyses/{aid}/metrics/0/0", params={"method": "reformer", "n_buckets": value}
    )
    # "8.9" is a number in the plain form, not a choice (400); the others are not in the plain
    # form at all (422: the request does not match, docs/api.md "Errors")
    assert r.status_code == (400 if value == "8.9" else 422), r.text
    assert r.json()["field"] == "n_buckets" and value in r.json()["detail"]
    assert "one of" in r.json()["detail"]


@pytest.mark.parametrize("path", ["/", "/healthz", "/static/css/app.css", "/gallery"])
def test_head_works_wherever_get_does(client, path):
    get, head = client.get(path), client.head(path)
    assert get.status_code == head.status_code == 200
    assert head.content == b"" and head.headers["content-type"] == get.headers["content-type"]


def test_head_on_a_share_page(client):
    sid = client.post("/api/share", json={"state": {"text": "head me"}}).json()["id"]
    r = client.head(f"/s/{sid}")
    assert r.status_code == 200 and r.content == b""


# ----------------------------------------------------------------------------- connections


def test_unknown_host_names_are_refused_on_loopback(client):
    r = client.get("/healthz", headers={"host": "attacker.example:8000"})
    assert r.status_code == 400 and r.json()["field"] is None
    assert "attacker.example" in r.json()["detail"]
    for host in ("localhost:8000", "127.0.0.1", "[::1]:8000"):
        assert client.get("/healthz", headers={"host": host}).status_code == 200, host


def test_allowed_hosts_setting(tmp_path, tiny_model):
    settings = make_settings(tmp_path, allowed_hosts="scope.example.org")
    with TestClient(create_app(settings, AnalysisService(settings, model=tiny_model))) as c:
        assert c.get("/healthz", headers={"host": "scope.example.org"}).status_code == 200
        assert c.get("/healthz", headers={"host": "localhost"}).status_code == 400
    assert make_settings(tmp_path, host="0.0.0.0").host_allowlist() is None
    assert make_settings(tmp_path, allowed_hosts="*").host_allowlist() is None


@pytest.mark.slow
def test_a_slow_request_head_is_cut_off(tmp_path):
    """A client trickling its request head is disconnected after the header timeout, while
    ordinary requests are answered."""
    import httpx

    from bench.bench_load import HOST, live_server

    env = {"SPARSESCOPE_HEADER_TIMEOUT": "1"}
    with live_server(tmp_path, tiny=True, env=env, start_timeout=120) as server:
        slow = socket.create_connection((HOST, server.port), timeout=WAIT_S)
        slow.sendall(b"GET /healthz HTTP/1.1\r\n")
        closed = False
        deadline = time.monotonic() + WAIT_S
        while time.monotonic() < deadline:
            try:
                slow.sendall(b"X")  # a byte at a time: uvicorn's own timer would restart
                time.sleep(0.2)
            except OSError:
                closed = True
                break
            slow.settimeout(0.01)
            try:
                if slow.recv(1) == b"":
                    closed = True
                    break
            except TimeoutError:
                pass
            except OSError:  # a reset: the server closed it with trickled bytes still unread
                closed = True
                break
        slow.close()
        assert closed, "the trickling connection was never closed"
        assert httpx.get(server.url + "/healthz", timeout=WAIT_S).status_code == 200


@pytest.mark.slow
def test_kill_9_during_batched_work_loses_no_acknowledged_share(tmp_path):
    """Analyses keep the model worker batching while shares are written; SIGKILL mid-stream:
    every share the server acknowledged (200) is in the database afterwards."""
    import os
    import signal

    import httpx

    from bench.bench_load import live_server, short_texts

    data = tmp_path / "data"
    acked: dict[str, str] = {}
    lock = threading.Lock()
    stop = threading.Event()
    with live_server(data, tiny=True, start_timeout=120) as server:

        def analyses(k: int) -> None:
            with httpx.Client(base_url=server.url, timeout=WAIT_S) as c:
                for text in short_texts(200, seed=k):
                    if stop.is_set():
                        return
                    try:
                        c.post("/api/analyze", json={"text": text})
                    except httpx.HTTPError:
                        return

        def shares(k: int) -> None:
            with httpx.Client(base_url=server.url, timeout=WAIT_S) as c:
                for i in range(80):  # within the per-address share burst (100)
                    if stop.is_set():
                        return
                    text = f"kill {k} {i}"
                    try:
                        r = c.post("/api/share", json={"state": {"text": text}})
                    except httpx.HTTPError:
                        return
                    if r.status_code == 200:
                        with lock:
                            acked[r.json()["id"]] = text

        threads = [threading.Thread(target=analyses, args=(k,), daemon=True) for k in range(4)]
        threads += [threading.Thread(target=shares, args=(k,), daemon=True) for k in range(2)]
        for t in threads:
            t.start()
        wait_for(lambda: len(acked) >= 20, "20 acknowledged shares")
        os.kill(server.pid, signal.SIGKILL)
        server.proc.wait(timeout=WAIT_S)
        stop.set()
        for t in threads:
            t.join(timeout=WAIT_S)
    conn = sqlite3.connect(data / DB_NAME)
    assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    stored = dict(conn.execute("SELECT id, state FROM shares").fetchall())
    conn.close()
    missing = set(acked) - set(stored)
    assert not missing, f"{len(missing)} acknowledged shares lost"
    assert all(json.loads(stored[sid])["text"] == text for sid, text in acked.items())


def test_round6_equals_python_round():
    import numpy as np

    from sparsescope.engine.payloads import round6

    rng = np.random.default_rng(0)
    k = rng.integers(0, 2_000_000, 20_000)
    ties = np.concatenate([(k + 0.5) / 1e6, np.nextafter((k + 0.5) / 1e6, 2),
                           np.nextafter((k + 0.5) / 1e6, -1), k / 1e6])  # fmt: skip
    xs = np.concatenate([rng.random(50_000), ties, [0.0, 1.0, -0.0, 5e-7, 1.5e-6, 2.5e-6,
                         0.1234565, 1e300, -3.25, float("nan"), float("inf")]])  # fmt: skip
    got, want = round6(xs), [round(float(x), 6) for x in xs]
    assert len(got) == len(want)
    for g, w in zip(got, want, strict=True):
        assert (g == w and str(g) == str(w)) or (g != g and w != w), (g, w)


def _rate_limited_server(tmp_path, tiny_model, **overrides):
    """A real uvicorn (in a thread) with uvicorn_options(settings), as `serve` runs it."""
    import uvicorn

    from sparsescope.web.connections import uvicorn_options

    settings = make_settings(tmp_path, share_rate_per_s=0.01, share_rate_burst=3, **overrides)
    app = create_app(settings, AnalysisService(settings, model=tiny_model))
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", **uvicorn_options(settings)))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    wait_for(lambda: server.started, "the server")
    return server, thread, f"http://127.0.0.1:{sock.getsockname()[1]}"


@pytest.mark.parametrize("header", ["X-Forwarded-For", "Forwarded", "X-Real-IP"])
def test_forwarding_headers_of_an_untrusted_client_do_not_escape_the_rate_limit(
    tmp_path, tiny_model, header
):
    """A loopback client that names itself another address each time is still one address
    (the address a header claims does not make it another client)."""
    server, thread, url = _rate_limited_server(tmp_path, tiny_model)
    try:
        codes = []
        for i in range(8):
            value = f"for=10.0.0.{i}" if header == "Forwarded" else f"10.0.0.{i}"
            r = httpx.post(
                f"{url}/api/share",
                json={"state": {"text": f"share {i}"}},
                headers={header: value},
                timeout=WAIT_S,
            )
            codes.append(r.status_code)
        assert codes[:3] == [200] * 3 and set(codes[3:]) == {429}, codes
    finally:
        server.should_exit = True
        thread.join(timeout=WAIT_S)


def test_x_forwarded_for_of_a_trusted_proxy_names_the_client(tmp_path, tiny_model):
    server, thread, url = _rate_limited_server(tmp_path, tiny_model, trusted_proxies="127.0.0.1")
    try:
        for i in range(6):  # each a different client behind the proxy: none limited
            r = httpx.post(
                f"{url}/api/share",
                json={"state": {"text": f"share {i}"}},
                headers={"X-Forwarded-For": f"10.0.0.{i}"},
                timeout=WAIT_S,
            )
            assert r.status_code == 200, (i, r.text)
    finally:
        server.should_exit = True
        thread.join(timeout=WAIT_S)
