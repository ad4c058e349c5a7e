"""The Universal Dependencies loader (`universal_dependencies`, kind 'parse')."""
from __future__ import annotations

import numpy as np

from jax_structured.data import core
from jax_structured.data import text as text_lib
from jax_structured.data.loaders import _common
from jax_structured.data.loaders import options

DEFAULTS = {'lowercase': False, 'tags': 'upos', 'strip_relation_subtypes': False, 'max_chars': 0}


@options.register('universal_dependencies', DEFAULTS)
def load_universal_dependencies(config) -> core.TaskData:
  """A Universal Dependencies treebank, kind 'parse'.

  Examples: `tokens` (word ids), `tags` (UPOS, or XPOS with `tags='xpos'`, ids of
  `extras['tag_vocab']`), `heads` (0-based, -1 = ROOT: the CoNLL-U HEAD minus one) and `relations`
  (ids of `extras['relation_vocab']`, names `extras['relation_names']`; `<pad>` = 0 and `<unk>` = 1
  for relations unseen in train). `strip_relation_subtypes` maps `nsubj:pass` to `nsubj`. With
  `max_chars > 0` every example also has `chars` int32[n, max_chars], the byte ids of its words as
  written (before `lowercase`; `text.char_ids`), for the parser's character CNN. (Parses are
  written as CoNLL-U by `data.sentences.to_conllu` from the input file's own rows.)
  """
  cfg = options.validate_config(config, 'universal_dependencies')
  if cfg['tags'] not in ('upos', 'xpos'):
    raise ValueError(f'config.data.tags={cfg["tags"]!r} must be "upos" or "xpos"')
  if cfg['max_chars'] and cfg['max_chars'] < 3:
    raise ValueError(f'config.data.max_chars={cfg["max_chars"]} must be 0 (no character ids) or '
                     '>= 3 (word begin, a byte, word end)')
  raw, skipped, _ = _common.read_splits('universal_dependencies', cfg, cfg['config'] or None)
  data = {s: _common.filter_train('universal_dependencies', s, records, lambda r: len(r['tokens']),
                                  cfg, skipped) for s, records in raw.items()}

  def relation(deprel):
    return deprel.split(':')[0] if cfg['strip_relation_subtypes'] else deprel

  def words(r):
    return [w.lower() for w in r['tokens']] if cfg['lowercase'] else list(r['tokens'])

  train = data['train']
  vocab = _common.vocabulary((words(r) for r in train), cfg)
  tag_vocab = core.Vocabulary(sorted({t for r in train for t in r[cfg['tags']]}))
  relation_vocab = core.Vocabulary(sorted({relation(d) for r in train for d in r['deprels']}))
  examples = {}
  for split, records in data.items():
    out = []
    for i, r in enumerate(_common.progress(records, f'universal_dependencies/{split}')):
      n = len(r['tokens'])
      lengths = {len(r[k]) for k in ('upos', 'xpos', 'heads', 'deprels')}
      if lengths != {n}:
        raise ValueError(f'universal_dependencies {split} sentence {r.get("sent_id", i)!r}: columns '
                         f'of different lengths ({n} tokens, {sorted(lengths)})')
      heads = np.asarray(r['heads'], np.int32) - 1
      if heads.min() < -1 or heads.max() >= n:
        raise ValueError(f'universal_dependencies {split} sentence {r.get("sent_id", i)!r}: a HEAD '
                         f'outside 0..{n}')
      example = {'tokens': vocab.encode(words(r)), 'tags': tag_vocab.encode(r[cfg['tags']]),
                 'heads': heads,
                 'relations': relation_vocab.encode([relation(d) for d in r['deprels']])}
      if cfg['max_chars']:
        example['chars'] = text_lib.char_ids(r['tokens'], cfg['max_chars'])
      out.append(example)
    examples[split] = out
  extras = {
      'tag_vocab': tag_vocab,
      'relation_vocab': relation_vocab,
      'relation_names': list(relation_vocab.tokens),
  }
  return _common.finish('universal_dependencies', 'parse', cfg, vocab, [], examples, skipped,
                        lambda: [words(r) for s in ('train', 'validation') for r in data.get(s, [])],
                        extras=extras)
