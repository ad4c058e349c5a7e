"""The sentence-pair loaders: SNLI (`snli`) and Quora Question Pairs (`quora_qqp`), kind 'pair'."""
from __future__ import annotations

from jax_structured.data import core
from jax_structured.data import text as text_lib
from jax_structured.data.loaders import _common
from jax_structured.data.loaders import options

SNLI_DEFAULTS = {'lowercase': False, 'trees': '', **options.BAD_LINES_DEFAULTS}
QUORA_DEFAULTS = {'lowercase': False, 'trees': '', **options.BAD_LINES_DEFAULTS}
SNLI_LABELS = ['entailment', 'neutral', 'contradiction']
QUORA_LABELS = ['not_duplicate', 'duplicate']


def _binary_parse_tokens(parse: str, lowercase: bool) -> list[str]:
  """Tokens of an SNLI binary parse `( ( A man ) ( ... ) )`: every non-bracket item."""
  return [t.lower() if lowercase else t for t in parse.split() if t not in ('(', ')')]


@options.register('snli', SNLI_DEFAULTS)
def load_snli(config) -> core.TaskData:
  """SNLI 1.0 (Bowman et al. 2015), kind 'pair'.

  Tokens come from the binary parses (the tokenisation of the corpus). Labels: entailment, neutral,
  contradiction; pairs without gold label are dropped by the builder (counted in `skipped`).
  """
  cfg = options.validate_config(config, 'snli')
  raw, skipped, _ = _common.read_splits('snli', cfg, None)
  lower = cfg['lowercase']
  data = {}
  for split, records in raw.items():
    items = [(_binary_parse_tokens(r['premise_binary_parse'], lower),
              _binary_parse_tokens(r['hypothesis_binary_parse'], lower),
              SNLI_LABELS.index(r['label']) if r['label'] in SNLI_LABELS else
              _common.label_index(SNLI_LABELS, r['label'], name='snli', split=split, index=i,
                                  cfg=cfg, builder_config=None))
             for i, r in enumerate(_common.progress(records, f'snli/{split}'))]
    data[split] = _common.filter_train('snli', split, items, _pair_length, cfg, skipped)
  return _pairs('snli', cfg, data, SNLI_LABELS, skipped)


@options.register('quora_qqp', QUORA_DEFAULTS)
def load_quora_qqp(config) -> core.TaskData:
  """Quora Question Pairs in the partition of Wang et al. (2017), kind 'pair' (labels 0/1)."""
  cfg = options.validate_config(config, 'quora_qqp')
  raw, skipped, _ = _common.read_splits('quora_qqp', cfg, None)
  lower = cfg['lowercase']
  data = {}
  for split, records in raw.items():
    items = []
    for i, r in enumerate(_common.progress(records, f'quora_qqp/{split}')):
      label = int(r['label'])
      if label not in (0, 1):
        where = _common.locate('quora_qqp', cfg, None, split, str(label), i)
        raise ValueError(f'{where}: quora_qqp label {label} is not 0 or 1')
      items.append((text_lib.whitespace_tokenize(r['question1'], lowercase=lower),
                    text_lib.whitespace_tokenize(r['question2'], lowercase=lower), label))
    data[split] = _common.filter_train('quora_qqp', split, items, _pair_length, cfg, skipped)
  return _pairs('quora_qqp', cfg, data, QUORA_LABELS, skipped)


def _pair_length(item) -> int:
  """The longer side's length of a (premise, hypothesis, label) item; 0 (empty) when a side is empty."""
  return min(len(item[0]), len(item[1])) and max(len(item[0]), len(item[1]))


def _pairs(name, cfg, data, label_names, skipped) -> core.TaskData:
  """Pair examples: one vocabulary over both sides of train."""
  vocab = _common.vocabulary((t for p, h, _ in data['train'] for t in (p, h)), cfg)
  examples = {s: [{'premise': vocab.encode(p), 'hypothesis': vocab.encode(h), 'label': y}
                  for p, h, y in items] for s, items in data.items()}
  return _common.finish(
      name, 'pair', cfg, vocab, label_names, examples, skipped,
      lambda: [t for s in ('train', 'validation') for p, h, _ in data.get(s, []) for t in (p, h)],
      words={s: [(p, h) for p, h, _ in items] for s, items in data.items()})
