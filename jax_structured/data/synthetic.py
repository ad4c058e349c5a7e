"""The built-in synthetic data of the default job: sentences with PLANTED dependency trees.

Registered as the data loader `synthetic_trees` (`config.data.name = 'synthetic_trees'`). Everything is
generated here, deterministically from `config.data.seed`; nothing is downloaded.

The grammar ("colour chains")
-----------------------------
Words are a verb (`sees`, `likes`, ...) or an *entity mention* `<colour>_<animal>`, e.g. `red_cat`.
The animal is the mention's *key*; colours form a cycle `c -> c + 1 (mod num_colors)`
(`red -> green -> blue -> red` for three colours). A sentence of `n` words has exactly one verb and
`n - 1` mentions; a key occurs once (a *singleton*) or twice (a *pair*) in a sentence, never more.
The planted tree is a deterministic function of the token sequence:

* the verb hangs from ROOT (`heads = -1`);
* the LEFT mention of a pair and every singleton hang from the verb;
* the RIGHT mention of a pair hangs from the left mention with the same key (so arcs cross: the
  trees are often non-projective, heights are 2-3).

Pairs are *consistent* when the modifier's colour follows its head's colour in the cycle
(`red_cat ... green_cat`). The label is 1 (`consistent`) when every pair is consistent and 0
(`violated`) when exactly one pair is not. A violated sentence is made from a consistent one by
swapping the two words of one pair, so the multiset of tokens has exactly the same distribution
under both labels: no function of the bag of words (however complex) beats chance, while a rule that
reads each word's colour next to its PLANTED head's colour gets 100%. A model can only compute the
label by relating each mention to its head: the key says *which* word (content), the word order says
*which of the two* is the head (left), which is exactly what the bilinear structured attention of
Liu & Lapata (2018, eqs. 8-18) can express; the induced (Chu-Liu-Edmonds) trees can then be scored
against the planted ones (UAS).

Examples follow `core` (kind 'sentence'): `{'tokens': int32[n], 'label': int, 'heads': int32[n]}`.
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from jax_structured.data import core
from jax_structured.data import registry

LOADER_NAME = 'synthetic_trees'
LABEL_NAMES = ['violated', 'consistent']

COLOR_NAMES = ('red', 'green', 'blue', 'gold', 'grey', 'pink', 'teal', 'plum')
KEY_NAMES = ('cat', 'dog', 'fox', 'owl', 'bee', 'elk', 'emu', 'yak', 'ant', 'bat', 'cow', 'eel',
             'hen', 'jay', 'ram', 'rat')
VERB_NAMES = ('sees', 'likes', 'finds', 'meets', 'feeds', 'hears', 'helps', 'calls')

# Every key a `config.data` section of this loader may have, with its default.
DEFAULTS: dict[str, Any] = {
    'name': LOADER_NAME,
    'batch_size': 32,          # training batch size (read by the training loop)
    'seed': 0,                 # generator seed: same seed, same data
    'num_train': 2000,
    'num_dev': 300,            # examples of the 'validation' split
    'num_test': 300,
    'min_length': 9,           # words per sentence, verb included (2M + 1 for M >= 4 mentions)
    'max_length': 13,
    'num_keys': 8,             # animals (vocabulary: num_keys * num_colors mentions + num_verbs verbs)
    'num_colors': 3,           # length of the colour cycle (>= 3 so a swapped pair is inconsistent)
    'num_verbs': 4,
    'bucket_boundaries': (),   # padded lengths; empty: one bucket of max_length (one compile)
}


def default_config():
  """A `ml_collections.ConfigDict` with every key of this loader at its default value."""
  import ml_collections  # pylint: disable=g-import-not-at-top
  return ml_collections.ConfigDict(dict(DEFAULTS))


def color_name(c: int) -> str:
  return COLOR_NAMES[c] if c < len(COLOR_NAMES) else f'c{c}'


def key_name(k: int) -> str:
  return KEY_NAMES[k] if k < len(KEY_NAMES) else f'k{k}'


def verb_name(v: int) -> str:
  return VERB_NAMES[v] if v < len(VERB_NAMES) else f'v{v}'


def word_list(num_keys: int, num_colors: int, num_verbs: int) -> list[str]:
  """All words of the grammar: verbs, then colours (adjectives), then animals (nouns)."""
  return ([verb_name(v) for v in range(num_verbs)] + [color_name(c) for c in range(num_colors)]
          + [key_name(k) for k in range(num_keys)])


def parse_word(word: str) -> tuple[str, int]:
  """('verb', v), ('adj', colour) or ('noun', key) for a word of the grammar; ValueError otherwise."""
  for kind, names, prefix in (('verb', VERB_NAMES, 'v'), ('adj', COLOR_NAMES, 'c'),
                              ('noun', KEY_NAMES, 'k')):
    if word in names:
      return kind, names.index(word)
    if word[:1] == prefix and word[1:].isdigit() and int(word[1:]) >= len(names):
      return kind, int(word[1:])
  raise ValueError(f'{word!r} is not a word of the {LOADER_NAME} grammar')


def validate_config(config) -> dict[str, Any]:
  """Checks a `config.data` section and returns it as a plain dict with defaults filled in.

  Args:
    config: a ConfigDict or dict with keys from `DEFAULTS`.

  Returns:
    dict with every key of `DEFAULTS`; `bucket_boundaries` resolved to a non-empty tuple.

  Raises:
    ValueError: naming the offending `config.data.<key>` for unknown keys or inconsistent values.
  """
  given = dict(config.to_dict() if hasattr(config, 'to_dict') else config)
  unknown = sorted(set(given) - set(DEFAULTS))
  if unknown:
    raise ValueError(f'unknown key(s) config.data.{unknown[0]} for the {LOADER_NAME} loader '
                     f'(all unknown: {unknown}); valid keys: {sorted(DEFAULTS)}')
  cfg = dict(DEFAULTS, **given)
  if cfg['name'] != LOADER_NAME:
    raise ValueError(f'config.data.name={cfg["name"]!r}, expected {LOADER_NAME!r}')
  for key in ('num_train', 'num_dev', 'num_test', 'seed'):
    if int(cfg[key]) < 0:
      raise ValueError(f'config.data.{key}={cfg[key]} must be >= 0')
  for key in ('num_train', 'batch_size', 'num_verbs', 'num_keys'):
    if int(cfg[key]) < 1:
      raise ValueError(f'config.data.{key}={cfg[key]} must be >= 1')
  if int(cfg['num_colors']) < 3:
    raise ValueError(f'config.data.num_colors={cfg["num_colors"]} must be >= 3: with 2 colours a '
                     'swapped pair would still follow the cycle')
  lo, hi = int(cfg['min_length']), int(cfg['max_length'])
  if hi < lo:
    raise ValueError(f'config.data.max_length={hi} must be >= config.data.min_length={lo}')
  m_lo, m_hi = _mention_range(lo, hi)
  if m_lo > m_hi:
    raise ValueError(f'config.data.min_length={lo} / max_length={hi}: sentences have 2M + 1 words '
                     '(a verb and M >= 4 two-word mentions); no such length in the range')
  if int(cfg['num_keys']) < (m_hi + 1) // 2:
    raise ValueError(f'config.data.num_keys={cfg["num_keys"]} is too small for {m_hi} mentions per '
                     f'sentence (a key is used at most twice): need >= {(m_hi + 1) // 2}')
  boundaries = tuple(int(b) for b in cfg['bucket_boundaries'])
  if boundaries and (list(boundaries) != sorted(set(boundaries)) or boundaries[0] < 1):
    raise ValueError(f'config.data.bucket_boundaries={boundaries} must be increasing positive ints')
  cfg['bucket_boundaries'] = boundaries or (2 * m_hi + 1,)
  return cfg


def _mention_range(min_length: int, max_length: int) -> tuple[int, int]:
  """Numbers of mentions M with 4 <= M and min_length <= 2M + 1 <= max_length."""
  return max(4, min_length // 2), (max_length - 1) // 2


def generate_sentence(rng: np.random.Generator, *, num_mentions: int, label: int, num_keys: int,
                      num_colors: int, num_verbs: int) -> tuple[list[str], np.ndarray]:
  """Samples one sentence of the colour-chain grammar (see the module docstring).

  A consistent *base* sentence is drawn first: M // 2 pairs (the second mention's colour follows the
  first's), one singleton if M is odd, units (verb, mentions) in random order. A transposition of the
  nouns of two mentions from different pairs is drawn too; if applying it does not break a pair, both
  are redrawn (whatever the label, so this rejection biases neither class). Label 1 returns the base,
  label 0 the transposed sentence: the same colour sequence, the same bag of words, a key sequence
  with the same distribution, and two inconsistent pairs.

  Args:
    rng: numpy random generator (consumed).
    num_mentions: M >= 4 two-word mentions (the sentence has 2M + 1 words).
    label: 1 (consistent) or 0 (violated).
    num_keys, num_colors, num_verbs: grammar sizes (num_keys >= ceil(M / 2)).

  Returns:
    (words: list of 2M + 1 str, heads: int32[2M + 1] with the planted tree, -1 = ROOT).
  """
  num_pairs = num_mentions // 2
  while True:
    keys = [int(k) for k in rng.choice(num_keys, num_mentions - num_pairs, replace=False)]
    # Mention m < 2P belongs to pair m // 2; the last mention (odd M) is a singleton.
    mention_keys = [keys[m // 2] for m in range(2 * num_pairs)] + keys[num_pairs:]
    units = [int(u) for u in rng.permutation(np.arange(-1, num_mentions))]  # -1: the verb
    colors = {}
    for m in units:  # in sentence order: a pair's second mention follows its first's colour
      if m < 0:
        continue
      partner = m ^ 1 if m < 2 * num_pairs else -1
      colors[m] = ((colors[partner] + 1) % num_colors if partner in colors
                   else int(rng.integers(num_colors)))
    a, b = rng.choice(2 * num_pairs, 2, replace=False)
    while a // 2 == b // 2:
      a, b = rng.choice(2 * num_pairs, 2, replace=False)
    swapped = list(mention_keys)
    swapped[a], swapped[b] = swapped[b], swapped[a]
    verb = verb_name(int(rng.integers(num_verbs)))
    base = _render(units, mention_keys, colors, verb)
    violated = _render(units, swapped, colors, verb)
    if label_from_tree(violated, planted_heads(violated), num_colors) == 0:
      break
  words = base if label == 1 else violated
  return words, planted_heads(words)


def _render(units: Sequence[int], keys: Sequence[int], colors: dict[int, int], verb: str
            ) -> list[str]:
  words = []
  for m in units:
    words += [verb] if m < 0 else [color_name(colors[m]), key_name(keys[m])]
  return words


def planted_heads(words: Sequence[str]) -> np.ndarray:
  """Recovers the planted tree from the token sequence alone (the grammar is deterministic).

  Rules: the verb hangs from ROOT; an adjective (colour) from the noun right after it; the first
  occurrence of a noun (animal) from the verb; its second occurrence from the first.

  Args:
    words: a sentence of the grammar.

  Returns:
    heads int32[n] (-1 = ROOT).

  Raises:
    ValueError: if the words do not form a sentence of the grammar (not exactly one verb, an adjective
      not followed by a noun, a noun without its adjective, a noun used more than twice).
  """
  parsed = [parse_word(w) for w in words]
  verbs = [i for i, (kind, _) in enumerate(parsed) if kind == 'verb']
  if len(verbs) != 1:
    raise ValueError(f'a sentence needs exactly one verb, got {len(verbs)}: {list(words)}')
  heads = np.full((len(words),), verbs[0], np.int32)
  heads[verbs[0]] = -1
  first: dict[int, int] = {}
  for i, (kind, value) in enumerate(parsed):
    if kind == 'adj':
      if i + 1 >= len(parsed) or parsed[i + 1][0] != 'noun':
        raise ValueError(f'adjective {words[i]!r} at {i} is not followed by a noun: {list(words)}')
      heads[i] = i + 1
    elif kind == 'noun':
      if i == 0 or parsed[i - 1][0] != 'adj':
        raise ValueError(f'noun {words[i]!r} at {i} has no adjective before it: {list(words)}')
      if value in first:
        if first[value] < 0:
          raise ValueError(f'noun {words[i]!r} occurs more than twice: {list(words)}')
        heads[i], first[value] = first[value], -1
      else:
        first[value] = i
  return heads


def label_from_tree(words: Sequence[str], heads: np.ndarray, num_colors: int) -> int:
  """The label read off the tree: 1 iff for every noun -> noun arc the modifier's adjective colour
  follows the head's adjective colour in the cycle (colours are the adjective children)."""
  heads = np.asarray(heads)
  parsed = [parse_word(w) for w in words]
  color_of = {int(h): parsed[m][1] for m, h in enumerate(heads) if parsed[m][0] == 'adj'}
  for m, h in enumerate(heads):
    if h >= 0 and parsed[m][0] == 'noun' and parsed[int(h)][0] == 'noun':
      if color_of[m] != (color_of[int(h)] + 1) % num_colors:
        return 0
  return 1


def generate_split(num_examples: int, seed: int, split_index: int, cfg: dict[str, Any]
                   ) -> list[tuple[list[str], np.ndarray, int]]:
  """Deterministic examples [(words, heads, label)] of one split; labels are fair coin flips.

  Args:
    num_examples: how many sentences.
    seed: `config.data.seed`.
    split_index: 0 train, 1 dev, 2 test (each split has its own random stream).
    cfg: a validated config dict (`validate_config`).

  Returns:
    A list of (words, heads int32[n], label) triples.
  """
  rng = np.random.default_rng([int(seed), int(split_index)])
  m_lo, m_hi = _mention_range(int(cfg['min_length']), int(cfg['max_length']))
  out = []
  for _ in range(num_examples):
    num_mentions = int(rng.integers(m_lo, m_hi + 1))
    label = int(rng.integers(2))
    words, heads = generate_sentence(rng, num_mentions=num_mentions, label=label,
                                     num_keys=int(cfg['num_keys']),
                                     num_colors=int(cfg['num_colors']),
                                     num_verbs=int(cfg['num_verbs']))
    out.append((words, heads, label))
  return out


@registry.register(LOADER_NAME)
def load(config) -> core.TaskData:
  """Generates the three splits and encodes them (kind 'sentence', gold `heads` in every example).

  Args:
    config: the `config.data` ConfigDict (keys: see `DEFAULTS`; unknown keys are an error).

  Returns:
    TaskData(kind='sentence', vocab over the whole grammar, label_names=['violated', 'consistent'],
    splits train/validation/test (sizes num_train/num_dev/num_test), extras {'num_colors'}.
  """
  cfg = validate_config(config)
  vocab = core.Vocabulary(word_list(int(cfg['num_keys']), int(cfg['num_colors']),
                                    int(cfg['num_verbs'])))
  splits = {}
  for index, (name, size) in enumerate((('train', 'num_train'), ('validation', 'num_dev'),
                                        ('test', 'num_test'))):
    raw = generate_split(int(cfg[size]), int(cfg['seed']), index, cfg)
    examples = [{'tokens': vocab.encode(w), 'heads': h, 'label': y} for w, h, y in raw]
    splits[name] = core.Split(name, 'sentence', examples,
                              bucket_boundaries=cfg['bucket_boundaries'])
  return core.TaskData(kind='sentence', vocab=vocab, label_names=list(LABEL_NAMES), splits=splits,
                       extras={'num_colors': int(cfg['num_colors'])})
