"""Which parametrized cases run in the quick suite (the README's test command) and which in the slow stage
(`.ci/run` runs `pytest -m slow` after it). The quick suite keeps one case of each code path; a case
whose path another quick case already takes (the other root mode of a test that has a quick sibling in
that mode, a float64 repeat of a float32 check, a larger size) goes to the slow stage, which runs on
every CI run."""
import pytest


def quick_and_slow(quick, slow):
  """`pytest.mark.parametrize` values: those of `quick` as they are, those of `slow` marked slow.

  A value that is a tuple parametrizes several arguments (`'n,length'`), as in `parametrize` itself.
  """
  return [*quick, *(pytest.param(*(v if isinstance(v, tuple) else (v,)), marks=pytest.mark.slow)
                    for v in slow)]


# `single_root` of a test whose other mode has quick siblings elsewhere in its module.
SINGLE_ROOT_QUICK = quick_and_slow([True], [False])
MULTI_ROOT_QUICK = quick_and_slow([False], [True])
