"""torch-struct's projective top-k (`DependencyCRF(multiroot=False).topk(k)`) on N(0, 1) scores: two calls.

OMP_NUM_THREADS=1 taskset -c 1 /usr/bin/time -f "maxrss %M KB, wall %e s" python torch_struct_topk.py BATCH N K
(record 2026-12-04-k-best-and-max-marginals.md)
"""
import sys
import time

import torch
import torch_struct

batch, n, k = [int(x) for x in sys.argv[1:4]]
torch.manual_seed(0)
x = torch.randn(batch, n, n)
lengths = torch.full((batch,), n)
for call in ('first', 'second'):
  start = time.time()
  out = torch_struct.DependencyCRF(x, lengths, multiroot=False).topk(k)
  print(batch, n, k, tuple(out.shape), f'{call} {time.time() - start:.2f}s', flush=True)
