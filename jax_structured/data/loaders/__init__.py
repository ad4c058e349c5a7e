"""Registered loaders of the real datasets: TFDS builders -> tokens -> vocabulary -> encoded splits.

`data.load(config.data)` dispatches on `config.data.name` to one of the loaders below. Each loader
validates `config.data` against its schema (`options`: `default_config(name)` lists every key with its
default; unknown keys and wrongly typed values are errors naming `config.data.<key>`), reads the splits
with `builders.load_examples`, tokenises as the papers do, builds the vocabulary on the training split
only (`min_count`, plus `<pad>`/`<unk>`), encodes every split and optionally prepares initial
embeddings (`_common`: the steps they share).

Split names in `TaskData.splits` are `train`, `validation` (the development set) and `test`, as the
builders name them. When a dataset has no development split (TREC), `validation_fraction` of train is
held out deterministically (from `seed`) as `validation`; without a test split, `test_fraction` where
the loader has it (text_classification), else the split is absent and the console says so.

What was dropped is counted in `TaskData.skipped` (`'<split>/<reason>': count`, including the records
the builders dropped, e.g. SNLI pairs without gold label, blank lines of a user's file) and printed;
what was truncated but kept (documents cut to `max_sentences`, sentences to `max_sentence_length`) is
counted apart, in `TaskData.extras['truncated']`, and printed as "truncated". `max_length` drops too long
*training* examples only: evaluation splits are never filtered (buckets grow for long inputs).

Loaders (module: name, kind):
  sst                     sst                      'sentence'  config 'fine' | 'binary'
  trec                    trec                     'sentence'  config 'coarse' | 'fine'
  pairs                   snli, quora_qqp          'pair'
  ptb_lm                  ptb_lm                   'lm'        (one stream per split when num_steps > 0)
  universal_dependencies  universal_dependencies   'parse'     config = treebank ('' = the only one)
  translation             iwslt15_en_vi            'translation'  train/validation/test_split name the
                          built split of each role (train.* | tst2012.* | tst2013.*); labels = target
                          vocabulary
  documents               document_classification  'document'  config 'yelp13' | 'yelp14' | 'imdb' | ...
                          text_classification      'sentence' or 'document' (`split_sentences`);
                                                   config = dataset name
"""
from jax_structured import discovery
from jax_structured.data.loaders import options
from jax_structured.data.loaders._common import load_vocabularies, save_vocabularies
from jax_structured.data.loaders.documents import (PUNCTUATION_OPTIONS, PUNCTUATION_TOKEN,
                                                   load_document_classification,
                                                   load_text_classification)
from jax_structured.data.loaders.options import (COMMON_DEFAULTS, LOADER_DEFAULTS, default_config,
                                                 loader_defaults, parse_overrides, validate_config,
                                                 with_text_classification_data)
from jax_structured.data.loaders.pairs import QUORA_LABELS, SNLI_LABELS, load_quora_qqp, load_snli
from jax_structured.data.loaders.ptb_lm import EOS, load_ptb_lm
from jax_structured.data.loaders.sst import SST_LABELS, load_sst
from jax_structured.data.loaders.translation import (BOS_ID, EOS_ID, TARGET_BOS, TARGET_EOS,
                                                     load_iwslt15_en_vi, target_vocabulary)
from jax_structured.data.loaders.trec import load_trec, trec_tokens
from jax_structured.data.loaders.universal_dependencies import load_universal_dependencies

# Every public module of this package is a loader that registers itself (a new one: add its module).
discovery.import_submodules(__name__, registry='data loader registry')

__all__ = [
    'BOS_ID', 'COMMON_DEFAULTS', 'EOS', 'EOS_ID', 'LOADER_DEFAULTS', 'PUNCTUATION_OPTIONS',
    'PUNCTUATION_TOKEN', 'QUORA_LABELS', 'SNLI_LABELS', 'SST_LABELS', 'TARGET_BOS', 'TARGET_EOS',
    'default_config', 'load_document_classification', 'load_iwslt15_en_vi', 'load_ptb_lm',
    'load_quora_qqp', 'load_snli', 'load_sst', 'load_text_classification', 'load_trec',
    'load_universal_dependencies', 'load_vocabularies', 'loader_defaults', 'options',
    'parse_overrides', 'save_vocabularies', 'target_vocabulary', 'trec_tokens', 'validate_config',
    'with_text_classification_data',
]
