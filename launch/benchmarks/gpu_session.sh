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
#   3. lowering.log: seconds to trace + lower, and to compile, each kernel at the benchmark's block sizes.
# Time: about 230 s for the trees family on the H200 before the kernel columns (f7f076d), so step 1 has
# `--budget_s=300` under a 420 s timeout; steps 2 and 3 under 120 s and 60 s: at most 600 s in all, the
# device tool's per-command limit. Give the call `timeout_s=600`. Wheels are not needed for these steps
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
  timeout 420 python3 -m launch.benchmark report --out="$OUT" --families=trees --budget_s=300 $REPORT_ARGS \
    > "$OUT/report.log" 2>&1
  echo "report: exit $?"; tail -n 30 "$OUT/report.md" 2>/dev/null
fi
if [[ $STEPS == *2* ]]; then
  timeout 120 python3 -m pytest -q -p no:xdist -p no:cacheprovider -m 'slow or not slow' tests/test_trees_kernels.py \
    > "$OUT/kernel_tests.log" 2>&1
  echo "kernel tests: exit $?"; tail -n 15 "$OUT/kernel_tests.log"
fi
if [[ $STEPS == *3* ]]; then
  timeout 60 python3 - > "$OUT/lowering.log" 2>&1 <<'EOF'
"""Trace + lower, and compile (a GPU only), each fused kernel alone: forward, and forward + backward."""
import time
import jax
import jax.numpy as jnp
from jax_structured import trees

if jax.default_backend() != 'gpu':
  raise SystemExit('no GPU: skipped (tests/test_trees_kernels.py lowers the kernels for cuda on a CPU)')
print(f'jax {jax.__version__}, {jax.devices()[0].device_kind}')
for batch, n in ((512, 32), (64, 64), (32, 200)):
  for single_root in (True, False):
    arc = jnp.zeros((batch, n, n), jnp.float32)
    root = jnp.zeros((batch, n), jnp.float32)

    def forward(arc, root):
      with trees.use_kernels('on'):
        return trees.marginals(arc, root, single_root=single_root, exact='flag')

    def with_grad(arc, root):
      return jax.value_and_grad(lambda a, r: jnp.sum(forward(a, r)[0] ** 2), argnums=(0, 1))(arc, root)

    for name, fn in (('forward', forward), ('forward+backward', with_grad)):
      start = time.perf_counter()
      lowered = jax.jit(fn).trace(arc, root).lower(lowering_platforms=('cuda',))
      lower_s = time.perf_counter() - start
      start = time.perf_counter()
      lowered.compile()
      compile_s = time.perf_counter() - start
      print(f'{batch}x{n} single_root={single_root} {name}: trace+lower {lower_s:.2f} s, '
            f'compile {compile_s:.2f} s', flush=True)
EOF
  echo "lowering: exit $?"; cat "$OUT/lowering.log"
fi
