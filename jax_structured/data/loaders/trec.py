"""The TREC question classification loader (`trec`, kind 'sentence')."""
from __future__ import annotations

from jax_structured.data import core
from jax_structured.data import text as text_lib
from jax_structured.data.loaders import _common
from jax_structured.data.loaders import options

DEFAULTS = {'config': 'coarse', 'lowercase': False, 'clean': True, 'validation_fraction': 0.1,
            'trees': '', **options.BAD_LINES_DEFAULTS}


def trec_tokens(question: str, *, clean: bool = DEFAULTS['clean'],
                lowercase: bool = DEFAULTS['lowercase']) -> list[str]:
  """The words of one TREC question as the `trec` loader reads them (defaults: its defaults): Kim's
  `clean_str` (`clean=True`) or whitespace; `launch.parse --format=trec` uses the same words."""
  if clean:
    return text_lib.clean_str(question, lowercase=lowercase).split()
  return text_lib.whitespace_tokenize(question, lowercase=lowercase)


@options.register('trec', DEFAULTS)
def load_trec(config) -> core.TaskData:
  """TREC question classification (Li & Roth 2002), kind 'sentence'.

  `config`: 'coarse' (6 classes) or 'fine' (50). Text is cleaned with Kim (2014)'s `clean_str`
  (`clean=True`; Kim keeps the case for TREC, hence `lowercase=False` by default). TREC has no dev
  split: `validation_fraction` (0.1) of train is held out. Label names are sorted from train; a test
  label unseen in train is an error naming the file and line.
  """
  cfg = options.validate_config(config, 'trec')
  if cfg['config'] not in ('coarse', 'fine'):
    raise ValueError(f'config.data.config={cfg["config"]!r} for trec must be "coarse" or "fine"')
  raw, skipped, held_out = _common.read_splits('trec', cfg, None)
  key = f'label_{cfg["config"]}'
  tokens = lambda t: trec_tokens(t, clean=cfg['clean'], lowercase=cfg['lowercase'])
  data = {s: _common.filter_train('trec', s, [(tokens(r['text']), r[key]) for r in records],
                                  lambda x: len(x[0]), cfg, skipped) for s, records in raw.items()}
  return _common.classification('trec', None, cfg, data, skipped, held_out)
