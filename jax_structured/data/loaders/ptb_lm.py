"""The Penn Treebank language-modelling loader (`ptb_lm`, kind 'lm')."""
from __future__ import annotations

from jax_structured.data import core
from jax_structured.data import text as text_lib
from jax_structured.data.loaders import _common
from jax_structured.data.loaders import options

DEFAULTS = {'lowercase': False, 'num_steps': 35, 'context': 0}
EOS = '<eos>'


@options.register('ptb_lm', DEFAULTS)
def load_ptb_lm(config) -> core.TaskData:
  """Penn Treebank language modelling (Mikolov's simple-examples), kind 'lm'.

  Every line becomes its words followed by `<eos>` (the data is used as is: it already maps rare
  words to `<unk>`, which is our UNK id). With `num_steps > 0` each split is one stream, batched
  contiguously (`batching.lm_stream_batches`, Zaremba et al. 2014); with `num_steps = 0` every
  sentence is one example (`inputs`/`targets` within the sentence). `context > 0` (stream batches
  only) adds the `context` tokens before each window to the batch (`context [B, C]`), so a model that
  carries no state between steps still reads across window boundaries.
  """
  cfg = options.validate_config(config, 'ptb_lm')
  if cfg['num_steps'] < 0:
    raise ValueError(f'config.data.num_steps={cfg["num_steps"]} must be >= 0')
  if cfg['context'] < 0 or (cfg['context'] and not cfg['num_steps']):
    raise ValueError(f'config.data.context={cfg["context"]} must be >= 0 and needs num_steps > 0')
  raw, skipped, _ = _common.read_splits('ptb_lm', cfg, None)
  data = {}
  for split, records in raw.items():
    lines = [text_lib.whitespace_tokenize(r['text'], lowercase=cfg['lowercase']) + [EOS]
             for r in records]
    data[split] = lines if cfg['num_steps'] else _common.filter_train(
        'ptb_lm', split, lines, len, cfg, skipped, max_length=cfg['max_length'] + 1 if
        cfg['max_length'] else 0)
  vocab = _common.vocabulary(data['train'], cfg)
  if cfg['num_steps']:
    examples = {s: [{'tokens': vocab.encode([t for line in lines for t in line])}]
                for s, lines in data.items()}
  else:
    examples = {s: [{'tokens': vocab.encode(line)} for line in lines] for s, lines in data.items()}
  return _common.finish('ptb_lm', 'lm', cfg, vocab, [], examples, skipped,
                        lambda: [line for s in ('train', 'validation') for line in data.get(s, [])],
                        num_steps=cfg['num_steps'] or None, context=cfg['context'])
