"""Penn Treebank language-modelling data (Mikolov et al. 2010, `simple-examples`).

Upstream files: `ptb.train.txt`, `ptb.valid.txt`, `ptb.test.txt` (from `simple-examples.tgz`,
`data/`): lower-cased, numbers as `N`, rare words as `<unk>`, 10k types; one sentence a line,
with a leading space. Each line is one example `{'text': line}`, kept as is (only the line
terminator is removed); the pipeline appends `<eos>` and streams the lines.
"""
from __future__ import annotations

import collections
import pathlib
from typing import Iterator, Sequence

import tensorflow_datasets as tfds

from jax_structured.data.builders import _base

_FILES = {'train': 'ptb.train.txt', 'validation': 'ptb.valid.txt', 'test': 'ptb.test.txt'}


class PtbLm(_base.ManualBuilder, skip_registration=True):
  """PTB sentences, one per line, in corpus order."""

  name = 'ptb_lm'
  DESCRIPTION = __doc__
  HOMEPAGE = 'https://www.fit.vutbr.cz/~imikolov/rnnlm/'
  CITATION = ('Mikolov et al. 2010. Recurrent neural network based language model. Interspeech. '
              'Marcus et al. 1993. Building a Large Annotated Corpus of English: The Penn Treebank.')
  MANUAL_DOWNLOAD_INSTRUCTIONS = """
  Download http://www.fit.vutbr.cz/~imikolov/rnnlm/simple-examples.tgz, extract it and copy
  data/ptb.train.txt, data/ptb.valid.txt, data/ptb.test.txt into manual_dir.
  """

  @classmethod
  def features(cls):
    return {'text': tfds.features.Text()}

  @classmethod
  def source_files(cls, manual_dir, config_name):
    return _base.split_files('ptb_lm', manual_dir, {s: [n] for s, n in _FILES.items()},
                             cls.MANUAL_DOWNLOAD_INSTRUCTIONS)

  def _examples(self, split: str, files: Sequence[pathlib.Path],
                dropped: collections.Counter) -> Iterator[dict]:
    for path in files:
      for _, line in _base.read_lines(path):
        yield {'text': line}
