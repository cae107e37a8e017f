"""A run's P buffer (sparse_core/runtime.py, ``KeptBuffers``): a huge-page mapping of its own,
kept for a later run once no tensor views it, and never handed out while one does."""

from __future__ import annotations

import threading

import pytest
import torch

from sparse_core import runtime as R

CPU = torch.device("cpu")
SHAPE = (2, 1, 3, 1024, 1024)  # 24 MiB: over HUGE_PAGES_MIN_BYTES


def ptr(t: torch.Tensor) -> int:
    return t.untyped_storage().data_ptr()


@pytest.fixture
def pool():
    return R.KeptBuffers()


def test_a_mapping_is_handed_out_again_once_nothing_views_it(pool):
    a = pool(SHAPE, CPU)
    first = ptr(a)
    a.fill_(0.25)
    view = a[1, 0, 2, :4, :4]
    del a
    b = pool(SHAPE, CPU)  # a view of the first still lives: a new mapping
    assert ptr(b) != first
    assert torch.equal(view, torch.full((4, 4), 0.25))
    del view
    c = pool(SHAPE, CPU)  # now the first is free: the same pages again
    assert ptr(c) == first
    assert ptr(c) != ptr(b)


def test_another_size_gets_its_own_mapping(pool):
    a = pool(SHAPE, CPU)
    first = ptr(a)
    del a
    other = pool((2, 1, 3, 1024, 512), CPU)
    assert ptr(other) != first


def test_only_the_last_few_are_kept(pool):
    held = [pool(SHAPE, CPU) for _ in range(R.KEPT_BUFFERS + 2)]
    assert len(pool._kept) == R.KEPT_BUFFERS
    ptrs = {ptr(t) for t in held}
    assert len(ptrs) == len(held)  # every one in use: all distinct
    del held
    again = pool(SHAPE, CPU)
    assert ptr(again) in ptrs  # one of the kept (the others went with their tensors)


def test_threads_never_share_a_mapping(pool):
    got: list[torch.Tensor] = []
    lock = threading.Lock()
    start = threading.Barrier(6)

    def take():
        start.wait()
        t = pool(SHAPE, CPU)
        with lock:
            got.append(t)

    threads = [threading.Thread(target=take) for _ in range(6)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert len({ptr(t) for t in got}) == 6


def test_a_run_never_writes_into_an_output_that_is_still_held(tiny_model, monkeypatch):
    """With every P buffer a kept mapping (threshold 0), a later run reuses only the buffers
    of outputs that are gone: the held output's P stays what it was."""
    monkeypatch.setattr(R, "HUGE_PAGES_MIN_BYTES", 0)
    text_a = "The chef who ran to the store was out of food."
    text_b = "So he went back home at once, and nobody saw him there again."
    a = tiny_model.run(text_a, alpha=1.5)
    probs_a = a.probs.clone()
    b = tiny_model.run(text_a, alpha=1.5)  # the same shape: a kept buffer if any were free
    assert ptr(b.probs) != ptr(a.probs)
    b_ptr = ptr(b.probs)
    del b
    c = tiny_model.run(text_a, alpha=1.2)  # b's buffer, free again
    assert ptr(c.probs) == b_ptr
    assert torch.equal(a.probs, probs_a)
    assert torch.equal(c.probs, tiny_model.run(text_a, alpha=1.2).probs)
    d = tiny_model.run(text_b, alpha=1.5)  # another length: another size
    assert torch.equal(a.probs, probs_a) and d.probs.shape[-1] != a.probs.shape[-1]


def test_the_plain_runtime_takes_fresh_memory(tiny_model, monkeypatch):
    """A runtime without kept buffers gives the same run as the model's own (kept mappings),
    and none of its buffers joins the model's pool."""
    monkeypatch.setattr(R, "HUGE_PAGES_MIN_BYTES", 0)
    text = "The chef who ran to the store was out of food."
    kept = tiny_model.run(text)  # the model's own runtime: its kept buffers
    pool = list(tiny_model.runtime.buffers._kept)
    plain = tiny_model.run(text, runtime=R.Runtime())
    assert torch.equal(plain.probs, kept.probs)
    assert tiny_model.runtime.buffers._kept == pool
    assert ptr(plain.probs) != ptr(kept.probs)
