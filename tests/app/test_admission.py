"""Bounded, memory-accounted admission of derived work (app/engine/admission.py) and its
cancellation (sparse_core/cancel.py), in process: the queue's bound gives 503 with a Retry-After
computed from the measured costs; a computation whose client has gone stops at its first head,
for every kind of derived work, and leaves nothing cached and no slot taken. No timing
assertions: states are awaited with bounded polls.
"""

from __future__ import annotations

import threading
import time

import pytest

from sparse_core import cancel
from sparsescope.engine.admission import ComputeGate, Costs, estimate_bytes, length_class
from sparsescope.engine.batching import Job, ModelWorker
from sparsescope.engine.errors import Busy, ClientGone
from sparsescope.engine.limits import CURRENT, NORMAL, JobContext
from sparsescope.engine.request import AnalysisRequest
from sparsescope.engine.service import AnalysisService
from tests.app.conftest import make_settings

WAIT_S = 30.0


def wait_for(cond, what: str, bound: float = WAIT_S) -> None:
    deadline = time.monotonic() + bound
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"gave up waiting for {what}")
        time.sleep(0.01)


def as_user(fn, ctx: JobContext | None = None):
    """``fn()`` as a user's request (what web/calls.model_call sets up)."""
    token = CURRENT.set(ctx or JobContext(priority=NORMAL, admit=True))
    try:
        return fn()
    finally:
        CURRENT.reset(token)


def blocked_job(gate: ComputeGate, kind: str, n: int, release: threading.Event):
    """A thread running a ``kind`` job of ``n`` tokens on ``gate`` until ``release``."""
    done: list = []

    def work():
        try:
            done.append(as_user(lambda: gate.run(kind, n, release.wait)))
        except Exception as exc:
            done.append(exc)

    t = threading.Thread(target=work, daemon=True)
    t.start()
    return t, done


def test_past_the_bound_503_with_retry_after_from_measured_costs():
    costs = Costs()
    costs.observe("metrics", 1000, 20.0)  # 0.02 s a token at n = 1000, as measured
    gate = ComputeGate(slots=1, queue_jobs=1, max_wait_s=1e9, costs=costs)
    release = threading.Event()
    first, _ = blocked_job(gate, "metrics", 1000, release)
    wait_for(lambda: gate.running == 1, "the first job to run")
    second, got = blocked_job(gate, "metrics", 1000, release)
    wait_for(lambda: gate.waiting == 1, "the second job to wait")
    with pytest.raises(Busy) as info:  # a third: the queue holds one
        as_user(lambda: gate.run("metrics", 1000, lambda: None))
    # what is left of the running job (≤ 20 s) + the one waiting (20 s) + its own (20 s)
    assert 40 <= info.value.retry_after <= 61
    assert gate.stats.refused == 1
    release.set()
    first.join(WAIT_S), second.join(WAIT_S)
    assert got == [True] and gate.running == 0 and gate.waiting == 0


def test_a_wait_over_max_wait_s_is_refused_and_costs_are_per_kind_and_length():
    costs = Costs()
    costs.observe("pareto", 4000, 400.0)  # 0.1 s a token at 4096's class
    costs.observe("metrics", 4000, 4.0)
    assert costs.per_token("pareto", 4096) == pytest.approx(0.1)
    assert costs.per_token("pareto", 2048) == pytest.approx(0.05)  # nearest class, scaled
    assert costs.per_token("flow", 4096) == costs.start  # not measured yet
    gate = ComputeGate(slots=1, queue_jobs=10, max_wait_s=60, costs=costs)
    release = threading.Event()
    t, _ = blocked_job(gate, "pareto", 4000, release)
    wait_for(lambda: gate.running == 1, "the sweep to run")
    with pytest.raises(Busy) as info:  # ~400 s of work ahead: over 60 s, not queued
        as_user(lambda: gate.run("metrics", 4000, lambda: None))
    assert info.value.retry_after >= 300
    assert gate.waiting == 0
    release.set()
    t.join(WAIT_S)
    # measured as it completed: the pareto estimate moved toward what this job took
    assert costs.per_token("pareto", 4096) < 0.1


def test_memory_accounting_runs_two_small_jobs_side_by_side_but_not_two_large():
    small, large = 256, 4096
    gate = ComputeGate(slots=2, memory_bytes=estimate_bytes("metrics", large) + 1, queue_jobs=8)
    release = threading.Event()
    jobs = [blocked_job(gate, "metrics", small, release) for _ in range(2)]
    wait_for(lambda: gate.running == 2, "two small jobs side by side")
    release.set()
    for t, _ in jobs:
        t.join(WAIT_S)
    release = threading.Event()
    jobs = [blocked_job(gate, "metrics", large, release) for _ in range(2)]
    wait_for(lambda: gate.running == 1 and gate.waiting == 1, "one large job alone")
    release.set()
    for t, done in jobs:
        t.join(WAIT_S)
        assert done == [True]
    assert length_class(3000) == 4096 and length_class(512) == 512


def test_a_waiting_job_whose_client_left_is_dropped():
    gate = ComputeGate(slots=1, queue_jobs=4)
    release = threading.Event()
    t, _ = blocked_job(gate, "flow", 100, release)
    wait_for(lambda: gate.running == 1, "a running job")
    ctx = JobContext(priority=NORMAL, admit=True)
    got: list = []
    waiter = threading.Thread(
        target=lambda: got.append(_catch(lambda: as_user(lambda: gate.run("flow", 100, int), ctx)))
    )
    waiter.start()
    wait_for(lambda: gate.waiting == 1, "the second to wait")
    ctx.gone.set()
    waiter.join(WAIT_S)
    assert isinstance(got[0], ClientGone) and gate.stats.dropped == 1 and gate.waiting == 0
    release.set()
    t.join(WAIT_S)


def _catch(fn):
    try:
        return fn()
    except Exception as exc:
        return exc


def test_a_running_job_stops_at_its_next_checkpoint_and_frees_its_slot():
    gate = ComputeGate(slots=1)
    ctx = JobContext(priority=NORMAL, admit=True)
    reads = []

    def engine_like():  # reads heads until told to stop (what the engine's loops do)
        while True:
            cancel.checkpoint()
            reads.append(1)
            time.sleep(0.001)

    got: list = []
    t = threading.Thread(target=lambda: got.append(_catch(lambda: as_user(
        lambda: gate.run("pareto", 512, engine_like), ctx))))  # fmt: skip
    t.start()
    wait_for(lambda: len(reads) > 20, "the job to read some heads")
    ctx.gone.set()
    t.join(WAIT_S)
    assert isinstance(got[0], ClientGone) and gate.stats.cancelled == 1
    stopped = len(reads)
    time.sleep(0.2)
    assert len(reads) == stopped  # no more heads read
    assert gate.running == 0 and as_user(lambda: gate.run("pareto", 512, lambda: "next")) == "next"


KINDS = [
    ("metrics", lambda s, a: s.metrics(a, 0, 1, "topk", {"k": "3"})),
    ("pareto head", lambda s, a: s.pareto(a, 1, 0)),
    ("pareto mean", lambda s, a: s.pareto(a, None, None)),
    ("budgets head", lambda s, a: s.budgets(a, 0, 0)),
    ("budgets all", lambda s, a: s.budgets(a, None, None)),
    ("flow", lambda s, a: s.flow(a, 2)),
    ("summary", lambda s, a: s.summary(a, ["h2o", "moba"])),
    ("head", lambda s, a: s.head(a, 1, 1, "methods")),
    ("roles", lambda s, a: s.roles(a)),
]


@pytest.mark.parametrize(("kind", "ask"), KINDS, ids=[k for k, _ in KINDS])
def test_every_kind_of_derived_work_stops_when_its_client_has_gone(
    tmp_path, tiny_model, sentence, kind, ask
):
    """The engine's own loops hit a checkpoint: with the token set, each kind of work stops at
    its first head (ClientGone), caches nothing, frees its slot; asked again, it is computed."""
    svc = AnalysisService(make_settings(tmp_path), model=tiny_model)
    svc.start()
    aid = svc.analyze_entry(AnalysisRequest(sentence), ["window"]).id
    gone = JobContext(priority=NORMAL, admit=True)
    gone.gone.set()
    before = cancel.checkpoints()
    with pytest.raises(ClientGone):
        as_user(lambda: ask(svc, aid), gone)
    assert cancel.checkpoints() - before <= 2  # it stopped at its first head or row block
    assert svc.gate.stats.cancelled == 1 and svc.gate.running == 0
    got = as_user(lambda: ask(svc, aid))  # not cached as done: computed now, in full
    assert got and svc.gate.stats.completed >= 1


def test_an_analysis_503_quotes_the_summary_cost_as_measured(tiny_model):
    release = threading.Event()
    worker = ModelWorker(tiny_model, window_s=0, queue_tokens=1000,
                         run_one=lambda j: release.wait())  # fmt: skip
    first = Job(AnalysisRequest("running"), 800, JobContext(priority=NORMAL, admit=True))
    worker.submit(first)
    wait_for(lambda: worker.waiting == 0, "the worker to take the first job")
    late = Job(AnalysisRequest("late"), 800, JobContext(priority=NORMAL, admit=True))
    with pytest.raises(Busy) as plain:
        worker.submit(late)
    worker.summary_seconds_per_token = lambda n: 0.1  # the summary measured at 0.1 s a token
    with pytest.raises(Busy) as measured:
        worker.submit(late)
    # 1,600 tokens at ≥ 0.1 s each: the summaries the forwards lead to, not the forwards alone
    assert measured.value.retry_after >= 160 > plain.value.retry_after
    release.set()
    first.future.result(timeout=WAIT_S)
