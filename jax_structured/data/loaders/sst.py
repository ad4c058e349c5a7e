"""The Stanford Sentiment Treebank loader (`sst`, kind 'sentence')."""
from __future__ import annotations

from jax_structured.data import core
from jax_structured.data import text as text_lib
from jax_structured.data import tree_batching
from jax_structured.data.loaders import _common
from jax_structured.data.loaders import options

# `trees`: a parser workdir whose cached heads every example gets (`parsed_trees`; '' = none).
DEFAULTS = {'config': 'fine', 'train_phrases': False, 'binary_trees': False, 'trees': '',
            **options.BAD_LINES_DEFAULTS}
SST_LABELS = {'fine': ['very negative', 'negative', 'neutral', 'positive', 'very positive'],
              'binary': ['negative', 'positive']}


@options.register('sst', DEFAULTS)
def load_sst(config) -> core.TaskData:
  """Stanford Sentiment Treebank (Socher et al. 2013), kind 'sentence'.

  `config`: 'fine' (5 classes) or 'binary' (neutral sentences dropped by the builder). Tokens are the
  tree leaves as in the files (lower-cased if `lowercase`). `train_phrases=True` trains on every
  labelled phrase of the training trees (as Kim 2014 and Tai et al. 2015 do; binary: neutral phrases
  dropped, 0-1 -> negative, 3-4 -> positive); dev/test always use whole sentences.
  `binary_trees=True` adds each sentence's binarised tree as node arrays (`tree_batching`:
  'tree_children', 'tree_heights', 'tree_labels' (binary: neutral phrases -1); the batched Tree-LSTM's
  structure inputs and the phrase-level supervision's node labels); the tokens
  are then the tree leaves exactly (split on ASCII spaces only: an SST word may contain U+00A0). With
  both, every labelled phrase is a training example with its own subtree (`tree_batching.subtree_arrays`),
  root first, so tree encoders train on phrases as examples too.
  """
  cfg = options.validate_config(config, 'sst')
  if cfg['config'] not in SST_LABELS:
    raise ValueError(f'config.data.config={cfg["config"]!r} for sst must be "fine" or "binary"')
  raw, skipped, _ = _common.read_splits('sst', cfg, cfg['config'])
  lower = cfg['lowercase']
  data = {}
  sentences = {}  # each split's whole sentences: the word2vec corpus when train holds phrases
  for split, records in raw.items():
    items, sentences[split] = [], []
    for index, r in enumerate(_common.progress(records, f'sst/{split}')):
      if cfg['binary_trees']:
        tokens = [t.lower() if lower else t for t in r['text'].split(' ')]
        sentences[split].append(tokens)
        try:
          tree = tree_batching.binary_tree_arrays(r['tree'], tokens, lowercase=lower,
                                                  binary_labels=cfg['config'] == 'binary')
        except tree_batching.TreeError as e:
          where = _common.locate('sst', cfg, cfg['config'], split, r['tree'][:60], index)
          raise tree_batching.TreeError(f'{where}: {e}') from None
        if split == 'train' and cfg['train_phrases']:
          items.extend(_subtree_examples(tokens, tree))
        else:
          items.append((tokens, int(r['label']), tree))
      else:
        sentences[split].append(text_lib.whitespace_tokenize(r['text'], lowercase=lower))
        if split == 'train' and cfg['train_phrases']:
          for label, tokens in text_lib.sst_phrases(r['tree']):
            if cfg['config'] == 'binary':
              if label == 2:
                continue
              label = int(label > 2)
            items.append(([t.lower() if lower else t for t in tokens], int(label), {}))
        else:
          items.append((sentences[split][-1], int(r['label']), {}))
    data[split] = _common.filter_train('sst', split, items, lambda x: len(x[0]), cfg, skipped)
  vocab = _common.vocabulary((t for t, _, _ in data['train']), cfg)
  examples = {s: [{'tokens': vocab.encode(t), 'label': y, **tree} for t, y, tree in items]
              for s, items in data.items()}
  if cfg['train_phrases']:  # word2vec on the sentences, not on every phrase of them again
    corpus = lambda: [t for s in ('train', 'validation') for t in sentences.get(s, [])]
  else:
    corpus = lambda: [t for s in ('train', 'validation') for t, _, _ in data.get(s, [])]
  return _common.finish('sst', 'sentence', cfg, vocab, SST_LABELS[cfg['config']], examples, skipped,
                        corpus, words={s: [t for t, _, _ in items] for s, items in data.items()})


def _subtree_examples(tokens, tree):
  """(tokens, label, arrays) of every labelled phrase of one binarised SST tree, root first, then the
  other nodes by node id (leaves in word order, internal nodes in post-order); nodes labelled -1
  (binary SST: neutral) are left out."""
  labels = tree['tree_labels']
  root = len(labels) - 1
  out = []
  for node in [root] + list(range(root)):
    if labels[node] < 0:
      continue
    first, end, arrays = tree_batching.subtree_arrays(tree, node)
    out.append((tokens[first:end], int(labels[node]), arrays))
  return out
