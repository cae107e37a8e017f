"""Shared fixtures: a tiny random model for speed, the real default model for end-to-end tests."""

from __future__ import annotations

import os

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

SENTENCE = "The chef who ran to the store was out of food, so he went back."


@pytest.fixture(scope="session")
def tiny_model():
    from sparse_core.model import tiny_model as make

    return make(seed=0)


@pytest.fixture(scope="session")
def real_model():
    from sparse_core import load_model

    return load_model(device="cpu")


@pytest.fixture(scope="session")
def sentence() -> str:
    return SENTENCE
