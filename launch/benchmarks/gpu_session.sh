#!/bin/bash
# One lent GPU session (issue 61): every open trees figure and the fused kernels' checks, in one call.
#
#   bash launch/benchmarks/gpu_session.sh            # from the project root, on the GPU machine
#
# Written for the device tool's `run` (one NVIDIA H200, jax 0.11 CUDA in its image, no registry; the
# device README: /work/.library/device/README.md); results go to $OUT (default /tmp/gpu_session). The
# default STEPS=12345 runs, in order:
#   1. report.md / report.json / report.log: `python3 -m launch.benchmark report --families=trees`, FIRST
#      (the report's trees family: every column, the `kernel ...` columns, the kernels' errors against the
#      LU programs, the compile seconds of both, `model +grad prog` beside `model +grad`, the goals);
#   2. kernel_tests.log: tests/test_trees_kernels.py and tests/test_trees_exact_kernel.py (the exact
#      path's derivative kernel), slow ones included, where `use_kernels('on')` now selects the compiled
#      Triton kernels (not the interpreter): float64 against enumeration, the gradient against finite
#      differences, flags and the exact path of flagged sentences;
#   3. lowering.log: seconds to trace + lower, and to compile, the kernels at the benchmark's sizes that
#      they take (a block of at most `_kernels.MAX_BLOCK` words), and value + gradient ms with 1 to 16
#      warps per program (to check `_kernels.num_warps`);
#   4. mst_rounds.log: `trees.mst`'s straight rounds (the GPU body) at 64x64 and 32x200 with R = 1, 2, 4,
#      8 rounds per predicate read (`_mst._contract(..., rounds_per_predicate=R)`; the module default is
#      `_mst.ROUNDS_PER_PREDICATE`), against TurboParser's C++ CPU figures of the report (19.2 / 96.6 ms,
#      `launch/benchmarks/trees.py` REFERENCE; issue 61's goal: 10x faster), with rounds and loop
#      iterations per batch and the compile seconds of each R (compiled side by side in threads); and
#      R = 4 with the CPU rounds' scatters in place of the straight rounds' masked reductions for the
#      best arc into each supernode (`_mst._segment_best` / `_segment_best_dense`);
#   5. exact_grad.log: value + gradient through `trees.marginals` as models train (`exact='flag'` over
#      the batch, then the flagged sentences' exact path in a second program, `exact='in_program'`),
#      with one sharp sentence and with none, under `trees.use_kernels('on')` and `'off'`, at 512x32 and
#      64x64 (goal: one sharp sentence at most 2x none), and the gradients' difference between the modes.
#      It uses `trees`' public switches only, so it times whatever kernels `use_kernels('on')` selects
#      for the exact path's derivative (the XLA product where there is none).
# Time: every step runs under `timeout` at its cap or at what is left of DEADLINE_S (default 560 s from
# the start), whichever is less: step 1 330 s (`--budget_s=280`: 291 s on the H200 at budget 260, the
# family writes its tables after its last size), 2 110 s, 3 50 s, 4 45 s, 5 45 s; give the call
# `timeout_s=600` (what is under $OUT comes back even if it is cut). Wheels are not needed for these steps
# (the image has jax, flax, optax, absl, numpy, scipy, pytest, torch); a carried `.whl` folder
# (/work/shared/gpu/make_wheels.sh, plus torch-struct for its columns) is installed when present.
#
# STEPS=6 (never in the default): Cheng et al. (2016) Table 1, the Penn Treebank language models LSTM-1
# and LSTMN-1 with `configs/cheng/ptb_lm.py:lstm1` / `:lstmn1` as they are (40 epochs; docs/papers/cheng.md),
# one after the other, for what is left of DEADLINE_S; a model stopped by the deadline is saved
# (SIGTERM: `launch.train` saves the current step) and resumed by the next call. The workdirs live in
# /tmp/cheng_ptb (a checkpoint tree is too many files, too deep, to come back from $OUT whole) and are
# packed into $OUT/cheng_ptb.tgz.part0, part1, ... (15 MB pieces; the finished models without their
# checkpoints), with cheng.log and each finished model's test figures cheng_<model>_metrics.json. Needs
# `.whl` (ml_collections, clu, tensorflow-datasets) and the PTB files, both carried:
#   mkdir -p .gpu_carry/cheng && cp -r ../shared/data/ptb_lm .gpu_carry/ && echo /.gpu_carry/ >> .git/info/exclude
#   run(command='STEPS=6 bash launch/benchmarks/gpu_session.sh', carry=['.whl', '.gpu_carry'], timeout_s=600)
# then, to resume, copy the returned cheng_ptb.tgz.part* into .gpu_carry/cheng/ (replacing the old
# ones) and call again the same way, until cheng.log says both models are done (about 40 MB of
# checkpoints travel with each call: 2 per unfinished model, the latest and the best).
#
# Off a GPU (a check of the script): step 1 with REPORT_ARGS='--quick --jobs=1 --kernel_columns=always'
# (the kernel columns in the Pallas interpreter), step 2 in the interpreter, step 3 skipped (the CUDA
# lowering is tested on the CPU by tests/test_trees_kernels.py::test_kernels_lower_for_cuda), step 4 at
# 64x64 only with 3 calls per R, step 5 at 4x8 in the interpreter (their times mean nothing there);
# step 6 with CHENG_OPTIONS=,tiny and a short CHENG_BUDGET_S, twice, the second call resuming from the
# first one's pieces (CHENG_RESUME), e.g.
#   OUT=/tmp/x REPORT_ARGS='--quick --jobs=1 --kernel_columns=always' bash launch/benchmarks/gpu_session.sh
#   OUT=/tmp/x STEPS=6 CHENG_OPTIONS=,tiny CHENG_ARGS=--config.train.num_steps=20000 CHENG_BUDGET_S=40 \
#     PTB_DIR=../shared/data/ptb_lm bash launch/benchmarks/gpu_session.sh
#   mkdir -p /tmp/r && cp /tmp/x/cheng_ptb.tgz.part* /tmp/r && rm -r /tmp/cheng_ptb && OUT=/tmp/y STEPS=6 \
#     CHENG_RESUME=/tmp/r CHENG_OPTIONS=,tiny CHENG_ARGS=--config.train.num_steps=20000 CHENG_BUDGET_S=40 \
#     PTB_DIR=../shared/data/ptb_lm bash launch/benchmarks/gpu_session.sh
set -u
OUT=${OUT:-/tmp/gpu_session}
STEPS=${STEPS:-12345}
REPORT_ARGS=${REPORT_ARGS:-}
DEADLINE_S=${DEADLINE_S:-560}
mkdir -p "$OUT"
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
if [ -d .whl ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    && export PYTHONPATH=/tmp/site:$PYTHONPATH
fi
{ nvidia-smi -L 2>/dev/null; python3 -c 'import jax; print(jax.__version__, jax.devices())'; git log -1 --format=%h 2>/dev/null; } \
  | tee "$OUT/device.txt"

# Seconds for a step: its cap, or what is left before DEADLINE_S if less (0: no time left, skip it).
step_seconds() {
  local left=$((DEADLINE_S - SECONDS))
  if [ "$left" -lt 10 ]; then echo 0; elif [ "$1" -lt "$left" ]; then echo "$1"; else echo "$left"; fi
}

if [[ $STEPS == *1* ]] && t=$(step_seconds 330) && [ "$t" -gt 0 ]; then
  timeout "$t" python3 -m launch.benchmark report --out="$OUT" --families=trees --budget_s=280 $REPORT_ARGS \
    > "$OUT/report.log" 2>&1
  echo "report: exit $? (limit ${t} s)"; tail -n 30 "$OUT/report.md" 2>/dev/null
fi
if [[ $STEPS == *2* ]] && t=$(step_seconds 110) && [ "$t" -gt 0 ]; then
  timeout "$t" python3 -m pytest -q -p no:xdist -p no:cacheprovider -m 'slow or not slow' tests/test_trees_kernels.py \
    tests/test_trees_exact_kernel.py \
    > "$OUT/kernel_tests.log" 2>&1
  echo "kernel tests: exit $? (limit ${t} s)"; tail -n 15 "$OUT/kernel_tests.log"
fi
if [[ $STEPS == *3* ]] && t=$(step_seconds 50) && [ "$t" -gt 0 ]; then
  timeout "$t" python3 - > "$OUT/lowering.log" 2>&1 <<'EOF'
"""The fused kernels alone (single root): trace + lower and compile seconds at the benchmark's sizes
that take them (blocks of at most `_kernels.MAX_BLOCK` words), then value + gradient ms with 1 to 16
warps per program (`_kernels.num_warps`: 2 for a 32 x 32 block, 8 for 64 x 64, measured 2026-12-04)."""
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
  if _kernels.block_length(n) > _kernels.MAX_BLOCK:
    print(f'{batch}x{n}: block {_kernels.block_length(n)} > MAX_BLOCK {_kernels.MAX_BLOCK}: the LU path, skipped')
    continue
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
  echo "lowering and warps: exit $? (limit ${t} s)"; cat "$OUT/lowering.log"
fi
if [[ $STEPS == *4* ]] && t=$(step_seconds 45) && [ "$t" -gt 0 ]; then
  timeout "$t" python3 - > "$OUT/mst_rounds.log" 2>&1 <<'EOF'
"""`trees.mst`'s straight rounds (the body GPUs compile) with R rounds per host read of the rounds
loop's predicate, against TurboParser's C++ CPU figure (issue 61: 10x faster), single root, N(0, 1)."""
import concurrent.futures
import math
import time
import jax
import jax.numpy as jnp
import numpy as np
from jax_structured import trees
from jax_structured.trees import _mst
from launch.benchmarks import interleaved_medians
from launch.benchmarks import trees as trees_benchmark

ROUNDS = (1, 2, 4, 8)
on_gpu = jax.default_backend() == 'gpu'
print(f'jax {jax.__version__}, {jax.devices()[0].device_kind}; default R = {_mst.ROUNDS_PER_PREDICATE}'
      + ('' if on_gpu else ' (not a GPU: the straight rounds forced, 64x64 only, times mean nothing)'), flush=True)


def straight(rounds):
  """`_mst._mst_batched`'s heads by the straight rounds, `rounds` per predicate; and the round count."""
  def heads(arc, root, lengths):
    weights, penalty, valid, real = _mst._graph(arc, root, lengths, True)
    st, _ = _mst._contract(weights, penalty, valid, False, rounds)
    nodes = _mst._expand(st, weights.shape[-1])
    return jnp.where(real[:, 1:], nodes[:, 1:] - 1, -1), st['it']
  return jax.jit(heads)


def lower_all(programs):
  """{name: (jitted, args)} -> {name: lowered}; 'R=4 scatters' with `_mst._segment_best` (the CPU
  rounds' scatters) in place of the straight rounds' masked reductions, `_segment_best_dense`."""
  lowered = {}
  for name, (fn, args) in programs.items():
    dense = _mst._segment_best_dense
    if name[-1] == 'R=4 scatters':
      _mst._segment_best_dense = _mst._segment_best
    try:
      lowered[name] = fn.lower(*args)
    finally:
      _mst._segment_best_dense = dense
  return lowered


def compile_all(lowered):
  """{name: lowered} -> {name: (compiled, compile seconds)}, compiled in threads."""
  def compile_one(item):
    start = time.perf_counter()
    return item[0], (item[1].compile(), time.perf_counter() - start)
  with concurrent.futures.ThreadPoolExecutor(len(lowered)) as pool:
    return dict(pool.map(compile_one, lowered.items()))


sizes = ((64, 64), (32, 200)) if on_gpu else ((64, 64),)
programs, data = {}, {}
for batch, n in sizes:
  keys = jax.random.split(jax.random.key(0), 2)
  arc, root = jax.random.normal(keys[0], (batch, n, n)), jax.random.normal(keys[1], (batch, n))
  data[batch, n] = (arc, root, jnp.full((batch,), n, jnp.int32))
  programs.update({(batch, n, f'R={r}'): (straight(r), data[batch, n]) for r in ROUNDS})
  programs[batch, n, 'R=4 scatters'] = (straight(4), data[batch, n])
  programs[batch, n, 'trees.mst'] = (jax.jit(trees.mst), (arc, root))
start = time.perf_counter()
compiled = compile_all(lower_all(programs))
print(f'{len(compiled)} programs compiled in {time.perf_counter() - start:.1f} s (in parallel threads)', flush=True)
for batch, n in sizes:
  arc, root, lengths = data[batch, n]
  calls = {name: (lambda fn=fn, args=args: jax.block_until_ready(fn(*args)))
           for (b, m, name), (fn, _) in compiled.items() if (b, m) == (batch, n)
           for args in [programs[b, m, name][1]]}
  results = {name: call() for name, call in calls.items()}
  rounds = int(results['R=1'][1])
  same = all(np.array_equal(results['R=1'][0], out[0] if isinstance(out, tuple) else out) for out in results.values())
  timed = interleaved_medians(calls, 15 if on_gpu else 3)
  reference = trees_benchmark.REFERENCE['ref turbo CLE (cpu)'][(batch, n)]
  print(f'{batch}x{n}: {rounds} rounds; heads equal for every R and trees.mst: {same}; '
        f'C++ reference {reference} ms', flush=True)
  for name, (median_s, _, count) in timed.items():
    r = int(name[2:3]) if name.startswith('R=') else None
    loops = f', {math.ceil(rounds / r)} loop iterations' if r else ''
    print(f'  {name}: {1e3 * median_s:.3f} ms (median of {count}), {reference / (1e3 * median_s):.1f}x faster than '
          f'C++ (goal 10x); compile {compiled[batch, n, name][1]:.1f} s{loops}', flush=True)
EOF
  echo "mst rounds: exit $? (limit ${t} s)"; cat "$OUT/mst_rounds.log"
fi
if [[ $STEPS == *5* ]] && t=$(step_seconds 45) && [ "$t" -gt 0 ]; then
  timeout "$t" python3 - > "$OUT/exact_grad.log" 2>&1 <<'EOF'
"""Value + gradient through `trees.marginals` as models train it, with one sharp sentence vs none,
under `trees.use_kernels('on')` and `'off'`: the exact path's derivative (issue 61: 1 sharp <= 2x none)."""
import concurrent.futures
import importlib.util
import time
import jax
import jax.numpy as jnp
import numpy as np
from jax_structured import trees
from launch.benchmarks import interleaved_medians
from launch.benchmarks import trees as trees_benchmark

on_gpu = jax.default_backend() == 'gpu'
kernel_module = importlib.util.find_spec('jax_structured.trees._exact_kernel_grad') is not None
print(f'jax {jax.__version__}, {jax.devices()[0].device_kind}; exact-derivative kernel module present: '
      f'{kernel_module}' + ('' if on_gpu else ' (not a GPU: the Pallas interpreter, times mean nothing)'),
      flush=True)


def loss(mode, exact):
  """sum(W * marginals) + sum(w * root marginals) traced under `use_kernels(mode)`; flagged sentences
  weigh 0 (`exact='flag'`); also the flags."""
  def fn(arc, root, arc_w, root_w):
    with trees.use_kernels(mode):
      arc_m, root_m = trees.marginals(arc, root, exact=exact)
    flagged = jnp.isnan(root_m).any(-1) | jnp.isnan(arc_m).any((-2, -1))
    arc_m = jnp.where(flagged[:, None, None], 0.0, arc_m)
    root_m = jnp.where(flagged[:, None], 0.0, root_m)
    return jnp.sum(arc_w * arc_m) + jnp.sum(root_w * root_m), flagged
  return fn


def split_step(hot, exact, exact_for_one):
  """Value and gradient as `training.steps` runs them: `hot` (the batch, `exact='flag'`), then, when
  the host sees flags, `exact` (the flagged sentences alone, the exact path in the program; its
  program compiled for one sentence, `exact_for_one`, when one is flagged)."""
  def step(arc, root, arc_w, root_w):
    (value, flagged), (d_arc, d_root) = hot(arc, root, arc_w, root_w)
    rows = np.flatnonzero(np.asarray(flagged))
    if rows.size:
      slots = np.resize(rows, 1 << max(0, rows.size - 1).bit_length())
      keep = jnp.asarray(np.arange(slots.size) < rows.size, arc_w.dtype)
      exact_value, (exact_arc, exact_root) = (exact_for_one if slots.size == 1 else exact)(
          arc[slots], root[slots], arc_w[slots] * keep[:, None, None], root_w[slots] * keep[:, None])
      value = value + exact_value
      d_arc = d_arc.at[rows].set(exact_arc[:rows.size])
      d_root = d_root.at[rows].set(exact_root[:rows.size])
    return jax.block_until_ready((value, d_arc, d_root)), rows.size
  return step


def compile_all(programs):
  """{name: (jitted, args)} -> {name: (compiled, compile seconds)}: lowered here, compiled in threads."""
  lowered = {name: fn.lower(*args) for name, (fn, args) in programs.items()}

  def compile_one(item):
    start = time.perf_counter()
    return item[0], (item[1].compile(), time.perf_counter() - start)
  with concurrent.futures.ThreadPoolExecutor(len(lowered)) as pool:
    return dict(pool.map(compile_one, lowered.items()))


modes = ('off', 'on')
sizes = ((512, 32), (64, 64)) if on_gpu else ((4, 8),)
data, programs = {}, {}
for batch, n in sizes:
  keys = jax.random.split(jax.random.key(0), 4)
  arc, root = jax.random.normal(keys[0], (batch, n, n)), jax.random.normal(keys[1], (batch, n))
  weights = (jax.random.normal(keys[2], (batch, n, n)), jax.random.normal(keys[3], (batch, n)))
  data[batch, n] = (arc, trees_benchmark.one_sharp_sentence(arc), root, weights)
  one = (arc[:1], root[:1], weights[0][:1], weights[1][:1])        # the exact program's batch: 1 slot
  for mode in modes:
    programs[batch, n, mode, 'hot'] = (
        jax.jit(jax.value_and_grad(loss(mode, 'flag'), (0, 1), has_aux=True)), (arc, root) + weights)
    programs[batch, n, mode, 'exact'] = (
        jax.jit(jax.value_and_grad(lambda *a, mode=mode: loss(mode, 'in_program')(*a)[0], (0, 1))), one)
start = time.perf_counter()
compiled = compile_all(programs)
print(f'{len(compiled)} programs compiled in {time.perf_counter() - start:.1f} s (in parallel threads)', flush=True)
for batch, n in sizes:
  arc, sharp, root, (arc_w, root_w) = data[batch, n]
  steps = {mode: split_step(compiled[batch, n, mode, 'hot'][0], programs[batch, n, mode, 'exact'][0],
                            compiled[batch, n, mode, 'exact'][0]) for mode in modes}
  scores = {'none': arc, '1 sharp': sharp}
  outputs = {(mode, name): steps[mode](x, root, arc_w, root_w) for mode in modes for name, x in scores.items()}
  calls = {f'{mode} {name}': (lambda mode=mode, x=x: steps[mode](x, root, arc_w, root_w))
           for mode in modes for name, x in scores.items()}
  timed = interleaved_medians(calls, 10 if on_gpu else 1)
  print(f'{batch}x{n}:', flush=True)
  for mode in modes:
    none_s, sharp_s = timed[f'{mode} none'][0], timed[f'{mode} 1 sharp'][0]
    (_, d_arc, _), flagged = outputs[(mode, '1 sharp')]
    off_arc = outputs[('off', '1 sharp')][0][1]
    print(f"  use_kernels('{mode}'): none {1e3 * none_s:.3f} ms, 1 sharp {1e3 * sharp_s:.3f} ms "
          f'({flagged} flagged) = {sharp_s / none_s:.2f}x none (goal <= 2x); compile hot / exact '
          f"{compiled[batch, n, mode, 'hot'][1]:.1f} / {compiled[batch, n, mode, 'exact'][1]:.1f} s; "
          f"1 sharp gradient vs 'off': max |diff| {float(jnp.max(jnp.abs(d_arc - off_arc))):.2e}", flush=True)
EOF
  echo "exact path derivative: exit $? (limit ${t} s)"; cat "$OUT/exact_grad.log"
fi
if [[ $STEPS == *6* ]]; then
  # Cheng et al. (2016) Table 1 (header): LSTM-1, then LSTMN-1, resumed from $CHENG_RESUME.
  PTB_DIR=${PTB_DIR:-}
  for d in ../shared/data/ptb_lm .gpu_carry/ptb_lm shared/data/ptb_lm; do
    [ -z "$PTB_DIR" ] && [ -f "$d/ptb.train.txt" ] && PTB_DIR=$d
  done
  CHENG_WORK=${CHENG_WORK:-/tmp/cheng_ptb}
  CHENG_RESUME=${CHENG_RESUME:-.gpu_carry/cheng}
  CHENG_BUDGET_S=${CHENG_BUDGET_S:-$((DEADLINE_S - SECONDS - 25))}
  stop_at=$((SECONDS + CHENG_BUDGET_S))
  mkdir -p "$CHENG_WORK"
  if ls "$CHENG_RESUME"/cheng_ptb.tgz.part* > /dev/null 2>&1; then
    cat "$CHENG_RESUME"/cheng_ptb.tgz.part* | tar -xz -C "$CHENG_WORK" \
      && echo "cheng: resumed from $CHENG_RESUME" | tee -a "$OUT/cheng.log"
  fi
  [ -z "$PTB_DIR" ] && echo "cheng: no ptb.train.txt in ../shared/data/ptb_lm, .gpu_carry/ptb_lm or shared/data/ptb_lm" \
    | tee -a "$OUT/cheng.log"
  for model in lstm1 lstmn1; do
    dir=$CHENG_WORK/$model
    left=$((stop_at - SECONDS))
    if [ -f "$dir/DONE" ]; then echo "cheng $model: done earlier" | tee -a "$OUT/cheng.log"; continue; fi
    if [ -z "$PTB_DIR" ] || [ "$left" -lt 30 ]; then
      echo "cheng $model: not run (${left} s left)" | tee -a "$OUT/cheng.log"; continue
    fi
    echo "cheng $model: training for at most ${left} s" | tee -a "$OUT/cheng.log"
    timeout -k 60 "$left" python3 -m launch.train --config="configs/cheng/ptb_lm.py:$model${CHENG_OPTIONS:-}" \
      --workdir="$dir" --config.data.manual_dir="$(cd "$PTB_DIR" && pwd)" ${CHENG_ARGS:-} >> "$OUT/cheng.log" 2>&1
    code=$?
    if [ "$code" -eq 0 ]; then
      touch "$dir/DONE"; cp "$dir/metrics.json" "$OUT/cheng_${model}_metrics.json" 2>/dev/null
      echo "cheng $model: done" | tee -a "$OUT/cheng.log"
    else
      echo "cheng $model: stopped, exit $code (124 or 143: at the deadline, by SIGTERM: saved, the next call resumes)" \
        | tee -a "$OUT/cheng.log"
    fi
  done
  excludes=()
  for model in lstm1 lstmn1; do
    [ -f "$CHENG_WORK/$model/DONE" ] && excludes+=(--exclude="./$model/checkpoints")
  done
  tar -cz -C "$CHENG_WORK" "${excludes[@]}" . | split -b 15m -d -a 1 - "$OUT/cheng_ptb.tgz.part"
  ls -l "$OUT"/cheng_ptb.tgz.part* | tee -a "$OUT/cheng.log"
  grep -h -i "perplexity" "$OUT/cheng.log" | tail -n 8
fi
