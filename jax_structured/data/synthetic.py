"""The built-in synthetic data of the default job: sentences with PLANTED dependency trees.

Registered as the data loader `synthetic_trees` (`config.data.name = 'synthetic_trees'`). Everything is
generated here, deterministically from `config.data.seed`; nothing is downloaded.

The grammar ("nearest agreement")
---------------------------------
Words (every word has a colour, the last part of its spelling):

* 2 VERBS (`sees-red`, `likes-blue`), of different colours;
* 1 to `max_pairs` ANIMALS (`cat`, `dog`, ...), each as a PAIR of nouns of two different colours
  (`cat-red`, `cat-gold`); different pairs are different animals;
* modifiers (`cat's-pink`): 0 to `max_modifiers` per animal (at least one per sentence), each agreeing
  with one animal and with a colour of its own.

The words stand in any order (a uniformly random permutation, see "Sampling"). The planted tree is
read off the order, every word hanging from the NEAREST word of its head's kind that agrees with it:

* the first verb hangs from ROOT (`heads = -1`), the second verb from the first;
* every noun hangs from the nearer of the two verbs;
* every modifier hangs from the nearer of the two nouns of its animal.

Orders where a noun is equally far from both verbs, or a modifier from both nouns of its animal, are
never generated, so the tree is a function of the words' order. Trees are often non-projective.

The label (`match` = 1) says whether SOME word has the colour of its head in the planted tree (verbs
never match each other). Why each part is there:

* Agreement (animal) with a DISTRACTOR: every modifier has two nouns of its animal, so knowing which
  word it agrees with is not enough; the other noun usually has another colour and reading it gives
  the wrong answer. Nouns choose between two verbs of different colours in the same way.
* NEAREST, not adjacent: the head is the nearest word of the right kind, with other words in between
  (nouns of other animals, modifiers, the other verb), so the "attach to a neighbour" heuristic gives
  the wrong tree (and a label near chance, `tests/test_synthetic.py`).
* Every noun and every modifier can carry the label, so a model that computes it must find the head of
  (nearly) every word, not of a few: the induced trees are judged on all words (UAS).
* The bag of words says nothing about the label, for ANY classifier (see "Sampling"), so order, i.e.
  position, is the only information, and combining a word with its head the only way to use it.

Under the default job's context-free encoder (`models.context_free`: each word's vectors are computed
from the word alone, and order enters only as a penalty of `distance_slope` per word of distance on
the arc scores), the only route from a word to its head is the attention: structured attention (Liu &
Lapata 2018) gives word i its parent context p_i (eq. 16), and `r_i = tanh(W_r [e_i, p_i, c_i])`
(eq. 18) can compare the two colours; max pooling over words computes the existential. The arc scores
need only each word's kind and animal (agreement); the penalty makes the nearest agreeing word win.
Without the penalty (position vectors in the arc scorer instead) the attention solved the task in
2 of 3 seeds by attending to the FARTHER candidate: with two candidates of different colours, any
weighting that tells them apart tells the near one's colour, so the label alone cannot say which one
is the head (README, "The default job").

`kind='parse'` gives the same sentences as a treebank (the default job's supervised-parser variant).

Sampling (why P(label | bag) = 1/2 exactly)
-------------------------------------------
The bag (verbs, animals, colours, modifiers) is drawn first, without looking at the label. Then
uniformly random orders of the bag are drawn until one with label 0 and one with label 1 have been
seen (orders with ties are skipped); a bag where this does not happen within `MAX_ORDER_TRIES` draws
is dropped and redrawn (a decision that does not depend on the label either). Only then is the label
a fair coin, and the sentence is the first order seen with that label: a uniformly random order of
the bag conditioned on the label. So every bag appears with both labels, equally often.

Examples follow `core` (kind 'sentence'): `{'tokens': int32[n], 'label': int, 'heads': int32[n]}`.
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from jax_structured.data import core
from jax_structured.data import registry

LOADER_NAME = 'synthetic_trees'
LABEL_NAMES = ['no_match', 'match']

KEY_NAMES = ('cat', 'dog', 'fox', 'owl', 'bee', 'elk', 'emu', 'yak', 'ant', 'bat', 'cow', 'eel',
             'hen', 'jay', 'ram', 'rat')
COLOUR_NAMES = ('red', 'blue', 'green', 'gold', 'pink', 'grey', 'teal', 'plum')
VERB_NAMES = ('sees', 'likes', 'finds', 'meets', 'feeds', 'hears', 'helps', 'calls')
MODIFIER_SUFFIX = "'s"
KINDS = ('verb', 'noun', 'modifier')
VERBS_PER_SENTENCE = 2
# Random orders tried per bag to find both labels (a bag without both is redrawn; see "Sampling").
MAX_ORDER_TRIES = 100

# Every key a `config.data` section of this loader may have, with its default.
DEFAULTS: dict[str, Any] = {
    'name': LOADER_NAME,
    'batch_size': 32,          # training batch size (read by the training loop)
    'seed': 0,                 # generator seed: same seed, same data
    'num_train': 2000,
    'num_dev': 300,            # examples of the 'validation' split
    'num_test': 300,
    'min_length': 5,           # words per sentence (2 verbs + 2 nouns per animal + modifiers)
    'max_length': 14,
    'max_pairs': 2,            # animals (noun pairs) per sentence: 1..max_pairs
    'max_modifiers': 4,        # modifiers per animal: 0..max_modifiers (at least one per sentence)
    'num_keys': 8,             # animals (noun classes)
    'num_colours': 4,          # >= 3: the two nouns of a pair differ, modifiers may match neither
    'num_verbs': 4,            # vocabulary: num_colours * (num_verbs + 2 * num_keys) words
    'bucket_boundaries': (),   # padded lengths; empty: one bucket of max_length (one compile)
    'kind': 'sentence',        # 'sentence' (label + planted heads) or 'parse' (the planted trees as
                               # a treebank: word-kind tags, heads, root/dep relations; the
                               # supervised parser's data, the UAS upper bound of the default job)
}
KINDS_OF_DATA = ('sentence', 'parse')
RELATION_NAMES = ('dep', 'root')


def default_config():
  """A `ml_collections.ConfigDict` with every key of this loader at its default value."""
  import ml_collections  # pylint: disable=g-import-not-at-top
  return ml_collections.ConfigDict(dict(DEFAULTS))


def _name(names: Sequence[str], prefix: str, i: int) -> str:
  return names[i] if i < len(names) else f'{prefix}{i}'


def _index(names: Sequence[str], prefix: str, name: str) -> int:
  """Inverse of `_name`; -1 when `name` is not one of these names."""
  if name in names:
    return names.index(name)
  if name[:1] == prefix and name[1:].isdigit() and int(name[1:]) >= len(names):
    return int(name[1:])
  return -1


def verb_name(verb: int, colour: int) -> str:
  """'sees-red': verb `verb` in colour `colour`."""
  return f'{_name(VERB_NAMES, "v", verb)}-{_name(COLOUR_NAMES, "c", colour)}'


def noun_name(key: int, colour: int) -> str:
  """'cat-red': animal `key` in colour `colour`."""
  return f'{_name(KEY_NAMES, "k", key)}-{_name(COLOUR_NAMES, "c", colour)}'


def modifier_name(key: int, colour: int) -> str:
  """"cat's-red": a modifier agreeing with the animal `key`, of colour `colour`."""
  return f'{_name(KEY_NAMES, "k", key)}{MODIFIER_SUFFIX}-{_name(COLOUR_NAMES, "c", colour)}'


def word_list(num_keys: int, num_colours: int, num_verbs: int) -> list[str]:
  """All words of the grammar: verbs, then nouns, then modifiers (each kind in every colour)."""
  colours = range(num_colours)
  return ([verb_name(v, c) for v in range(num_verbs) for c in colours]
          + [noun_name(k, c) for k in range(num_keys) for c in colours]
          + [modifier_name(k, c) for k in range(num_keys) for c in colours])


def parse_word(word: str) -> tuple[str, int, int]:
  """(kind, index, colour): ('verb', verb, colour), ('noun', animal, colour) or ('modifier', animal,
  colour); ValueError naming the word otherwise."""
  stem, dash, colour_name = word.rpartition('-')
  colour = _index(COLOUR_NAMES, 'c', colour_name)
  if dash and colour >= 0:
    verb = _index(VERB_NAMES, 'v', stem)
    if verb >= 0:
      return 'verb', verb, colour
    kind = 'noun'
    if stem.endswith(MODIFIER_SUFFIX):
      stem, kind = stem[:-len(MODIFIER_SUFFIX)], 'modifier'
    key = _index(KEY_NAMES, 'k', stem)
    if key >= 0:
      return kind, key, colour
  raise ValueError(f'{word!r} is not a word of the {LOADER_NAME} grammar (verbs like '
                   f'{verb_name(0, 0)!r}, nouns like {noun_name(0, 0)!r}, modifiers like '
                   f'{modifier_name(0, 0)!r})')


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
  for key in ('num_dev', 'num_test', 'seed'):
    if int(cfg[key]) < 0:
      raise ValueError(f'config.data.{key}={cfg[key]} must be >= 0')
  for key in ('num_train', 'batch_size', 'num_verbs', 'max_pairs', 'max_modifiers'):
    if int(cfg[key]) < 1:
      raise ValueError(f'config.data.{key}={cfg[key]} must be >= 1')
  if int(cfg['num_keys']) < int(cfg['max_pairs']):
    raise ValueError(f'config.data.num_keys={cfg["num_keys"]} must be >= config.data.max_pairs='
                     f'{cfg["max_pairs"]} (the pairs of a sentence are different animals)')
  if int(cfg['num_colours']) < 3:
    raise ValueError(f'config.data.num_colours={cfg["num_colours"]} must be >= 3 (the two nouns of a '
                     'pair and the two verbs differ in colour, and modifiers also take colours '
                     'matching neither noun)')
  lo, hi = int(cfg['min_length']), int(cfg['max_length'])
  shortest = VERBS_PER_SENTENCE + 3
  longest = VERBS_PER_SENTENCE + int(cfg['max_pairs']) * (2 + int(cfg['max_modifiers']))
  if hi < lo:
    raise ValueError(f'config.data.max_length={hi} must be >= config.data.min_length={lo}')
  if hi < shortest or lo > longest:
    raise ValueError(f'config.data.min_length={lo} / max_length={hi}: sentences have between '
                     f'{shortest} and {longest} words (2 verbs, 2 nouns per animal, >= 1 modifier; '
                     'the longest set by config.data.max_pairs and max_modifiers)')
  boundaries = tuple(int(b) for b in cfg['bucket_boundaries'])
  if boundaries and (list(boundaries) != sorted(set(boundaries)) or boundaries[0] < 1):
    raise ValueError(f'config.data.bucket_boundaries={boundaries} must be increasing positive ints')
  if cfg['kind'] not in KINDS_OF_DATA:
    raise ValueError(f'config.data.kind={cfg["kind"]!r}; valid: {KINDS_OF_DATA}')
  cfg['bucket_boundaries'] = boundaries or (hi,)
  return cfg


def _tree(kinds: np.ndarray, keys: np.ndarray) -> np.ndarray | None:
  """The planted tree of parsed words, or None when a head is not unique (a tie in distance).

  Args:
    kinds: int [n], index into KINDS (0 verb, 1 noun, 2 modifier).
    keys: int [n], the animal of nouns and modifiers (unused for verbs).

  Returns:
    heads int32 [n] (-1 = ROOT), or None on a tie.

  Raises:
    ValueError: no verb, or a modifier without a noun of its animal.
  """
  n = len(kinds)
  positions = np.arange(n)
  verbs = positions[kinds == 0]
  if len(verbs) == 0:
    raise ValueError('no verb')
  heads = np.empty(n, np.int32)
  heads[verbs[0]] = -1
  heads[verbs[1:]] = verbs[0]
  for m in positions[kinds > 0]:
    if kinds[m] == 1:
      candidates = verbs
    else:
      candidates = positions[(kinds == 1) & (keys == keys[m])]
      if len(candidates) == 0:
        raise ValueError(f'modifier at {m} has no noun of its animal')
    distance = np.abs(candidates - m)
    nearest = distance == distance.min()
    if nearest.sum() > 1:
      return None
    heads[m] = candidates[nearest][0]
  return heads


def _parse(words: Sequence[str]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
  """(kinds, keys, colours) int arrays [n] of the words (`parse_word`)."""
  parsed = [parse_word(w) for w in words]
  return (np.array([KINDS.index(p[0]) for p in parsed], np.int64).reshape(-1),
          np.array([p[1] for p in parsed], np.int64).reshape(-1),
          np.array([p[2] for p in parsed], np.int64).reshape(-1))


def planted_heads(words: Sequence[str]) -> np.ndarray:
  """Recovers the planted tree from the token sequence alone (the grammar is deterministic).

  Rules (module docstring): the first verb hangs from ROOT, other verbs from the first; every noun
  from the nearest verb; every modifier from the nearest noun of its animal.

  Args:
    words: a sentence of the grammar.

  Returns:
    heads int32[n] (-1 = ROOT).

  Raises:
    ValueError: if the words do not form a sentence of the grammar (a word not of the grammar, no
      verb, a modifier without a noun of its animal, two candidate heads equally near).
  """
  kinds, keys, _ = _parse(words)
  try:
    heads = _tree(kinds, keys)
  except ValueError as e:
    raise ValueError(f'not a sentence of the {LOADER_NAME} grammar: {e}: {list(words)}') from None
  if heads is None:
    raise ValueError(f'not a sentence of the {LOADER_NAME} grammar: a word is equally near to two '
                     f'candidate heads: {list(words)}')
  return heads


def _label(colours: np.ndarray, heads: np.ndarray) -> int:
  attached = heads >= 0
  return int(np.any(colours[attached] == colours[heads[attached]]))


def label_from_tree(words: Sequence[str], heads: np.ndarray) -> int:
  """The label read off a tree: 1 iff some word hangs from a word of the same colour.

  Works for any `heads` (e.g. induced trees, -1 = ROOT), not only the planted one.
  """
  heads = np.asarray(heads)
  if heads.shape != (len(words),):
    raise ValueError(f'heads of shape {heads.shape} for {len(words)} words')
  return _label(_parse(words)[2], heads)


def _sample_bag(rng: np.random.Generator, *, num_keys: int, num_colours: int, num_verbs: int,
                max_pairs: int, max_modifiers: int, min_length: int, max_length: int,
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
  """The order-free content of a sentence, as int arrays [n] (kinds, index, colours) in a canonical
  order: 2 verbs of different colours (index: the verb), then for each of 1..max_pairs animals
  (index: the animal) its 2 nouns of different colours and its modifiers. Redrawn until the length
  is in [min_length, max_length] and there is at least one modifier."""
  while True:
    num_animals = int(rng.integers(1, max_pairs + 1))
    counts = rng.integers(0, max_modifiers + 1, num_animals)
    length = VERBS_PER_SENTENCE + 2 * num_animals + int(counts.sum())
    if min_length <= length <= max_length and counts.sum() > 0:
      break
  kinds = [np.zeros(VERBS_PER_SENTENCE, np.int64)]
  index = [rng.integers(num_verbs, size=VERBS_PER_SENTENCE)]
  colours = [rng.choice(num_colours, VERBS_PER_SENTENCE, replace=False)]
  for a, key in enumerate(rng.choice(num_keys, num_animals, replace=False)):
    kinds.append(np.array([1, 1] + [2] * int(counts[a])))
    index.append(np.full(2 + int(counts[a]), key))
    colours += [rng.choice(num_colours, 2, replace=False), rng.integers(num_colours, size=counts[a])]
  return (np.concatenate(kinds), np.concatenate(index).astype(np.int64),
          np.concatenate(colours).astype(np.int64))


def _candidates(kinds: np.ndarray, keys: np.ndarray) -> np.ndarray:
  """int [n, 2]: the two candidate heads (indices into the words) of every word of a generated bag:
  the two verbs for a noun, the two nouns of its animal for a modifier (-1, -1 for a verb)."""
  verbs = np.flatnonzero(kinds == 0)
  out = np.full((len(kinds), 2), -1, np.int64)
  for m in np.flatnonzero(kinds > 0):
    out[m] = verbs if kinds[m] == 1 else np.flatnonzero((kinds == 1) & (keys == keys[m]))
  return out


def _orders_with_both_labels(rng: np.random.Generator, kinds: np.ndarray, keys: np.ndarray,
                             colours: np.ndarray) -> dict[int, tuple[np.ndarray, np.ndarray]] | None:
  """{label: (order, heads)}: the first uniformly random order of a bag seen with each label (orders
  with ties skipped) and its planted tree; None when both labels were not seen within
  MAX_ORDER_TRIES orders.

  The orders are drawn in one batch and evaluated together: every word of a generated bag has exactly
  two candidate heads (`_candidates`); the nearer one in the order is its head.

  Args:
    rng: consumed.
    kinds, keys, colours: int [n], the bag (`_sample_bag`).

  Returns:
    order int [n] (word i of the sentence is bag word order[i]) and heads int32 [n] in sentence
    positions (-1 = ROOT).
  """
  n = len(kinds)
  candidates = _candidates(kinds, keys)
  dependents = np.flatnonzero(kinds > 0)
  orders = np.argsort(rng.random((MAX_ORDER_TRIES, n)), axis=1)  # [K, n] uniform orders
  position = np.argsort(orders, axis=1)  # position[k, i]: where bag word i stands in order k
  here = position[:, dependents]  # [K, d]
  distance = [np.abs(here - position[:, candidates[dependents, j]]) for j in (0, 1)]
  valid = np.all(distance[0] != distance[1], axis=1)  # no ties
  head = np.where(distance[0] < distance[1], candidates[dependents, 0], candidates[dependents, 1])
  labels = np.any(colours[head] == colours[dependents], axis=1).astype(int)
  found = {}
  for label in (0, 1):
    hits = np.flatnonzero(valid & (labels == label))
    if len(hits) == 0:
      return None
    k = hits[0]
    bag_heads = np.full(n, -1, np.int64)  # in bag indices; verbs: the first verb is the root
    bag_heads[dependents] = head[k]
    first_verb, second_verb = sorted(range(VERBS_PER_SENTENCE), key=lambda v: position[k, v])
    bag_heads[second_verb] = first_verb
    heads = np.where(bag_heads[orders[k]] >= 0, position[k, bag_heads[orders[k]]], -1)
    found[label] = (orders[k], heads.astype(np.int32))
  return found


def _words(kinds: np.ndarray, index: np.ndarray, colours: np.ndarray) -> list[str]:
  names = (verb_name, noun_name, modifier_name)
  return [names[k](int(i), int(c)) for k, i, c in zip(kinds, index, colours)]


def generate_sentence(rng: np.random.Generator, *, label: int, num_keys: int, num_colours: int,
                      num_verbs: int, max_pairs: int, max_modifiers: int, min_length: int,
                      max_length: int) -> tuple[list[str], np.ndarray]:
  """Samples one sentence of the nearest-agreement grammar with the given label (module docstring).

  The bag of words and the orders tried do not depend on `label` (the same `rng` state gives the
  same bag for both labels); the sentence is the first random order of the bag with that label.

  Args:
    rng: numpy random generator (consumed).
    label: 1 (some word has the colour of its head) or 0 (none has).
    num_keys, num_colours, num_verbs, max_pairs, max_modifiers, min_length, max_length: grammar
      sizes (see `DEFAULTS`).

  Returns:
    (words: list of str, heads: int32[n] with the planted tree, -1 = ROOT).
  """
  if label not in (0, 1):
    raise ValueError(f'label={label!r} must be 0 or 1')
  while True:
    kinds, index, colours = _sample_bag(
        rng, num_keys=num_keys, num_colours=num_colours, num_verbs=num_verbs, max_pairs=max_pairs,
        max_modifiers=max_modifiers, min_length=min_length, max_length=max_length)
    found = _orders_with_both_labels(rng, kinds, np.where(kinds > 0, index, -1), colours)
    if found is not None:
      break
  order, heads = found[label]
  return _words(kinds[order], index[order], colours[order]), heads


def generate_split(num_examples: int, seed: int, split_index: int, cfg: dict[str, Any]
                   ) -> list[tuple[list[str], np.ndarray, int]]:
  """Deterministic examples [(words, heads, label)] of one split; labels are fair coin flips.

  Args:
    num_examples: how many sentences.
    seed: `config.data.seed`.
    split_index: 0 train, 1 validation, 2 test (each split has its own random stream).
    cfg: a validated config dict (`validate_config`).

  Returns:
    A list of (words, heads int32[n], label) triples.
  """
  rng = np.random.default_rng([int(seed), int(split_index)])
  sizes = {k: int(cfg[k]) for k in ('num_keys', 'num_colours', 'num_verbs', 'max_pairs',
                                    'max_modifiers', 'min_length', 'max_length')}
  out = []
  for _ in range(num_examples):
    label = int(rng.integers(2))
    words, heads = generate_sentence(rng, label=label, **sizes)
    out.append((words, heads, label))
  return out


@registry.register(LOADER_NAME)
def load(config) -> core.TaskData:
  """Generates the three splits and encodes them.

  Args:
    config: the `config.data` ConfigDict (keys: see `DEFAULTS`; unknown keys are an error).

  Returns:
    `kind` 'sentence': TaskData(kind='sentence', vocab over the whole grammar,
    label_names=['no_match', 'match'], examples {'tokens', 'heads', 'label'}).
    `kind` 'parse': the same sentences as a treebank: TaskData(kind='parse', label_names=[],
    examples {'tokens', 'tags' (the word's kind: verb / noun / modifier), 'heads', 'relations'
    ('root' or 'dep')}, extras 'tag_vocab', 'relation_vocab', 'relation_names' as the
    universal_dependencies loader gives them).
    Splits train/validation/test of sizes num_train/num_dev/num_test either way.
  """
  cfg = validate_config(config)
  vocab = core.Vocabulary(word_list(int(cfg['num_keys']), int(cfg['num_colours']),
                                    int(cfg['num_verbs'])))
  tag_vocab, relation_vocab = core.Vocabulary(KINDS), core.Vocabulary(RELATION_NAMES)  # tag: kind
  kind = cfg['kind']
  splits = {}
  for index, (name, size) in enumerate((('train', 'num_train'), ('validation', 'num_dev'),
                                        ('test', 'num_test'))):
    raw = generate_split(int(cfg[size]), int(cfg['seed']), index, cfg)
    if kind == 'parse':
      examples = [{'tokens': vocab.encode(w), 'heads': h,
                   'tags': tag_vocab.encode([parse_word(x)[0] for x in w]),
                   'relations': relation_vocab.encode(['root' if head < 0 else 'dep' for head in h])}
                  for w, h, _ in raw]
    else:
      examples = [{'tokens': vocab.encode(w), 'heads': h, 'label': y} for w, h, y in raw]
    splits[name] = core.Split(name, kind, examples, bucket_boundaries=cfg['bucket_boundaries'])
  if kind == 'parse':
    return core.TaskData(kind='parse', vocab=vocab, label_names=[], splits=splits,
                         extras={'tag_vocab': tag_vocab, 'relation_vocab': relation_vocab,
                                 'relation_names': list(relation_vocab.tokens)})
  return core.TaskData(kind='sentence', vocab=vocab, label_names=list(LABEL_NAMES), splits=splits)
