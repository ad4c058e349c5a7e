#!/bin/bash
# One lent GPU session (issue 61): every open trees figure and the fused kernels' checks, in one call.
#
#   bash launch/benchmarks/gpu_session.sh            # from the project root, on the GPU machine
#
# Written for the device tool's `run` (one NVIDIA H200, jax 0.11 CUDA in its image, no registry; the
# device README: /work/.library/device/README.md); results go to $OUT (default /tmp/gpu_session):
#   1. report.md / report.json / report.log: `python3 -m launch.benchmark report --families=trees`, FIRST
#      (the report's trees family: every column, the `kernel ...` columns, the kernels' errors against the
#      LU programs, the compile seconds of both, `model +grad prog` beside `model +grad`, the goals);
#   2. kernel_tests.log: tests/test_trees_kernels.py, slow ones included, where `use_kernels('on')` now
#      selects the compiled Triton kernels (not the interpreter): float64 against enumeration, the gradient
#      against finite differences, flags and the exact path of flagged sentences;
#   3. lowering.log: seconds to trace + lower, and to compile, the kernels at the benchmark's sizes, and
#      value + gradient ms with 1 to 16 warps per program (to tune `_kernels.num_warps`).
# Time: about 230 s for the trees family on the H200 before the kernel columns (f7f076d), so step 1 has
# `--budget_s=280` under a 390 s timeout (the family writes its tables after its last size); steps 2 and
# 3 under 120 s and 80 s: at most 590 s in all, inside the device tool's per-command limit: give the
# call `timeout_s=600` (what is under $OUT comes back even if it is cut). Wheels are not needed for these steps
# (the image has jax, flax, optax, absl, numpy, scipy, pytest, torch); a carried `.whl` folder
# (/work/shared/gpu/make_wheels.sh, plus torch-struct for its columns) is installed when present.
# Off a GPU (a check of the script): step 1 with REPORT_ARGS='--quick --jobs=1 --kernel_columns=always'
# (the kernel columns in the Pallas interpreter), step 2 in the interpreter, step 3 skipped (the CUDA
# lowering is tested on the CPU by tests/test_trees_kernels.py::test_kernels_lower_for_cuda), e.g.
#   OUT=/tmp/x REPORT_ARGS='--quick --jobs=1 --kernel_columns=always' bash launch/benchmarks/gpu_session.sh
set -u
OUT=${OUT:-/tmp/gpu_session}
STEPS=${STEPS:-123}
REPORT_ARGS=${REPORT_ARGS:-}
mkdir -p "$OUT"
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
if [ -d .whl ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    && export PYTHONPATH=/tmp/site:$PYTHONPATH
fi
{ nvidia-smi -L 2>/dev/null; python3 -c 'import jax; print(jax.__version__, jax.devices())'; git log -1 --format=%h 2>/dev/null; } \
  | tee "$OUT/device.txt"

if [[ $STEPS == *1* ]]; then
  timeout 390 python3 -m launch.benchmark report --out="$OUT" --families=trees --budget_s=280 $REPORT_ARGS \
    > "$OUT/report.log" 2>&1
  echo "report: exit $?"; tail -n 30 "$OUT/report.md" 2>/dev/null
fi
if [[ $STEPS == *2* ]]; then
  timeout 120 python3 -m pytest -q -p no:xdist -p no:cacheprovider -m 'slow or not slow' tests/test_trees_kernels.py \
    > "$OUT/kernel_tests.log" 2>&1
  echo "kernel tests: exit $?"; tail -n 15 "$OUT/kernel_tests.log"
fi
if [[ $STEPS == *3* ]]; then
  timeout 80 python3 - > "$OUT/lowering.log" 2>&1 <<'EOF'
"""The fused kernels alone (single root): trace + lower and compile seconds at the benchmark's sizes,
then value + gradient ms with 1 to 16 warps per program (`_kernels.num_warps` is an untuned guess)."""
import statistics
import time
import jax
import jax.numpy as jnp
from jax_structured import trees
from jax_structured.trees import _kernels

if jax.default_backend() != 'gpu':
  raise SystemExit('no GPU: skipped (tests/test_trees_kernels.py lowers the kernels for cuda on a CPU)')
print(f'jax {jax.__version__}, {jax.devices()[0].device_kind}')
default_warps = _kernels.num_warps


def programs():
  def forward(arc, root):
    with trees.use_kernels('on'):
      return trees.marginals(arc, root, exact='flag')

  def with_grad(arc, root, weights):
    loss = lambda a, r: jnp.sum(weights * forward(a, r)[0])
    return jax.value_and_grad(loss, argnums=(0, 1))(arc, root)
  return forward, with_grad


for batch, n in ((512, 32), (64, 64), (32, 200)):
  keys = jax.random.split(jax.random.key(0), 3)
  arc = jax.random.normal(keys[0], (batch, n, n))
  root = jax.random.normal(keys[1], (batch, n))
  weights = jax.random.normal(keys[2], (batch, n, n))
  forward, with_grad = programs()
  for name, fn, args in (('forward', forward, (arc, root)), ('forward+backward', with_grad, (arc, root, weights))):
    start = time.perf_counter()
    lowered = jax.jit(fn).trace(*args).lower()
    lower_s = time.perf_counter() - start
    start = time.perf_counter()
    lowered.compile()
    print(f'{batch}x{n} {name} (warps {default_warps(_kernels.block_length(n))}): trace+lower {lower_s:.2f} s, '
          f'compile {time.perf_counter() - start:.2f} s', flush=True)
  for warps in (1, 2, 4, 8, 16):
    _kernels.num_warps = lambda p, w=warps: w
    step = jax.jit(programs()[1])
    try:
      jax.block_until_ready(step(arc, root, weights))
    except Exception as error:  # pylint: disable=broad-except
      print(f'{batch}x{n} warps {warps}: failed: {str(error).splitlines()[0][:200]}', flush=True)
      continue
    times = []
    for _ in range(20):
      start = time.perf_counter()
      jax.block_until_ready(step(arc, root, weights))
      times.append(time.perf_counter() - start)
    print(f'{batch}x{n} warps {warps}: value + gradient {1e3 * statistics.median(times):.3f} ms', flush=True)
  _kernels.num_warps = default_warps
EOF
  echo "lowering and warps: exit $?"; cat "$OUT/lowering.log"
fi
