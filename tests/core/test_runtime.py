"""How a run uses the machine (sparse_core/runtime.py) and which attention path a call takes
(``attention.choose_path``): the model's modules are left as transformers made them, a side
worker takes half of the linear rows through the runtime's forward, each path is chosen where the
table says, and every path and runtime gives the plain dense run's numbers bit for bit."""

from __future__ import annotations

from concurrent.futures import Future, ThreadPoolExecutor

import pytest
import torch

from sparse_core import attention as A
from sparse_core import runtime as R

TEXT = "The chef who ran to the store was out of food, so he went back home at once. " * 3
RECORDED = ("probs", "queries", "keys", "values", "hidden")
CPU = torch.device("cpu")


class CountingSide(ThreadPoolExecutor):
    """A one-worker executor that counts what it is given."""

    def __init__(self) -> None:
        super().__init__(1)
        self.submitted = 0

    def submit(self, fn, /, *args, **kwargs) -> Future:
        self.submitted += 1
        return super().submit(fn, *args, **kwargs)


def test_the_model_s_modules_are_not_patched(tiny_model):
    """No module of the loaded model has a forward of its own instance: a run's runtime does
    its work around the forward, not inside the modules."""
    patched = [name for name, mod in tiny_model.net.named_modules() if "forward" in vars(mod)]
    assert patched == []


def test_a_side_worker_takes_half_of_the_linear_rows_bit_for_bit(tiny_model, one_thread):
    text = TEXT * 2
    plain = tiny_model.run(text, alpha=1.5, runtime=R.Runtime())
    with CountingSide() as side:
        rt = R.Runtime(side=side)
        calls = []
        real = R.split_linear

        def spy(*args, **kwargs):
            calls.append(args[1].shape)
            return real(*args, **kwargs)

        R.split_linear = spy
        try:
            out = tiny_model.run(text, alpha=1.5, runtime=rt)
        finally:
            R.split_linear = real
    n = plain.n
    assert n >= 2 * R.SPLIT_MIN_ROWS
    linears = sum(type(m) is torch.nn.Linear for m in tiny_model.net.modules())
    assert len(calls) == linears  # every linear layer of the forward went through the mode
    heads = tiny_model.config.num_layers  # one submit per layer's second half of the heads
    assert side.submitted == linears + heads
    for name in RECORDED:
        assert torch.equal(getattr(out, name), getattr(plain, name)), name


def test_few_rows_stay_on_the_calling_thread():
    with CountingSide() as side:
        x, w = torch.randn(2 * R.SPLIT_MIN_ROWS - 1, 8), torch.randn(5, 8)
        assert torch.equal(R.split_linear(side, x, w), torch.nn.functional.linear(x, w))
        assert side.submitted == 0
        x = torch.randn(3, 2 * R.SPLIT_MIN_ROWS, 8)  # rows counted over the leading dims
        got = R.split_linear(side, x, w, torch.ones(5))
        assert side.submitted == 1 and got.shape == (3, 2 * R.SPLIT_MIN_ROWS, 5)


def test_the_mode_is_left_at_the_end_of_the_forward(tiny_model):
    """After a run with a side worker (and after one that failed) plain torch calls run as
    they are: the mode does not outlive the forward."""
    with CountingSide() as side:
        rt = R.Runtime(side=side)
        tiny_model.run(TEXT, runtime=rt)
        before = side.submitted
        x, w = torch.randn(4 * R.SPLIT_MIN_ROWS, 8), torch.randn(5, 8)
        torch.nn.functional.linear(x, w)
        with pytest.raises(RuntimeError), rt.forward():
            raise RuntimeError("a forward that fails")
        torch.nn.functional.linear(x, w)
        assert side.submitted == before


def _state(**kw) -> A.RunState:
    return A.RunState(alphas=[1.5], **kw)


@pytest.mark.parametrize(
    ("state", "shape", "device", "alpha", "path"),
    [
        (None, (1, 4, 8, 8), CPU, 1.5, "_plain_path"),
        (_state(discover=[]), (1, 4, 8, 8), CPU, 1.5, "_plain_path"),
        (_state(train=True, side=object()), (2, 4, 8, 8), CPU, 1.5, "_training_path"),
        (_state(segments=[(0, 4)], record=True), (1, 4, 8, 8), CPU, 1.5, "_packed_path"),
        (_state(store=object(), record=True, side=object()), (1, 4, 9, 9), CPU, 1.5,
         "_sparse_path"),
        (_state(side=object()), (1, 4, 8, 8), CPU, 1.5, "_split_heads"),
        (_state(side=object()), (2, 4, 8, 8), CPU, 1.5, "_dense_path"),  # a batch
        (_state(side=object()), (1, 1, 8, 8), CPU, 1.5, "_dense_path"),  # one head
        (_state(side=object()), (1, 4, 8, 8), CPU, torch.ones(1, 4, 1, 1), "_dense_path"),
        (_state(record=True), (1, 4, 600, 600), CPU, 1.5, "_dense_in_chunks"),
        (_state(record=True), (1, 4, 600, 600), torch.device("meta"), 1.5, "_dense_path"),
        (_state(record=False), (1, 4, 600, 600), CPU, 1.5, "_dense_path"),
        (_state(record=True), (1, 4, 600, 600), CPU, torch.ones(1, 4, 1, 1), "_dense_path"),
        (_state(record=True), (1, 4, 8, 8), CPU, 1.5, "_dense_path"),
    ],
)  # fmt: skip
def test_each_call_takes_the_path_of_the_table(state, shape, device, alpha, path):
    b, h, n, m = shape
    assert A.choose_path(state, b, h, n, m, device, alpha) is getattr(A, path)


@pytest.mark.parametrize("alpha", [1.0001, 1.25, 1.5, 2.0])
def test_every_path_and_runtime_gives_the_plain_run_bit_for_bit(
    tiny_model, one_thread, monkeypatch, alpha
):
    """One text through the dense path (plain, model's kept buffers), its heads split on a side
    worker, the dense path in chunks of heads, the sparse store (CSR, in chunks of rows) and
    packed with another text: the same P, queries, keys, values and hidden states."""
    plain = tiny_model.run(TEXT, alpha=alpha, runtime=R.Runtime())
    got = {"kept buffers": tiny_model.run(TEXT, alpha=alpha)}
    with ThreadPoolExecutor(1) as side:
        got["side"] = tiny_model.run(TEXT, alpha=alpha, side=side)
    got["packed"] = tiny_model.run_batch([TEXT, TEXT[:120]], alpha)[0]
    with monkeypatch.context() as mp:
        mp.setattr(A, "DENSE_CHUNK_SCORES", 1)
        got["chunks"] = tiny_model.run(TEXT, alpha=alpha)
    with monkeypatch.context() as mp:
        mp.setattr(tiny_model, "dense_max_bytes", 0)
        mp.setattr(A, "CHUNK_SCORES", 16 * plain.n)
        got["sparse"] = tiny_model.run(TEXT, alpha=alpha)
    assert not got["sparse"].attn.is_dense
    for how, out in got.items():
        for name in RECORDED:
            assert torch.equal(getattr(out, name), getattr(plain, name)), (how, name)
