"""The built-in synthetic data of the default job: sentences with PLANTED dependency trees.

Registered as the data loader `synthetic_trees` (`config.data.name = 'synthetic_trees'`). Everything is
generated here, deterministically from `config.data.seed`; nothing is downloaded.

The grammar ("colour match")
----------------------------
A sentence has one verb (`sees`, `likes`, ...) and one to `max_pairs` noun PAIRS: the two nouns of a
pair are the same animal (its class, `cat`) in two different colours (`cat-red`, `cat-blue`), one
before the verb (a *subject*) and one after it (an *object*); different pairs are different animals.
Modifiers (`cat's-gold`) agree in class with an animal of the sentence, carry a colour of their own
and stand anywhere on either side of the verb. The planted tree is read off the tokens:

* the verb hangs from ROOT (`heads = -1`);
* every noun hangs from the verb;
* every modifier hangs from the noun of ITS class on ITS side of the verb (the other noun of the class,
  across the verb, is a distractor; nouns of other classes may have the modifier's colour too). The
  trees are often non-projective (modifiers and nouns of different classes interleave).

The label (`match` = 1) says whether SOME modifier has the same colour as its head noun. It is a
pairwise property of the arcs of the planted tree: with the parent context p_i of Liu & Lapata
(2018, eq. 16) a modifier that attends to its planted head sees the head's colour, so
`r_i = tanh(W_r [e_i, p_i, c_i])` (eq. 18) can detect the match and max pooling over the words
computes the existential. A BiLSTM alone has to remember, on each side of the verb, the colour of
every animal and look it up at each modifier.

The bag of words says nothing about the label, for ANY classifier: the bag (verb, pairs and their
colours, modifiers) is drawn first; a bag is kept only when some modifier has the colour of one of
the two nouns of its class (otherwise only `match` = 0 were possible); then the label is a fair coin
and the word order (which noun of each pair is the subject, on which side each modifier stands, the
order within each side) is drawn uniformly among the orders with that label. So P(label | bag) = 1/2
exactly: the same bag appears with both labels, equally often.

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
SUBJECT, OBJECT = 0, 1  # sides of the verb
HEAD_SIDES = ('same', 'across')

# Every key a `config.data` section of this loader may have, with its default.
DEFAULTS: dict[str, Any] = {
    'name': LOADER_NAME,
    'batch_size': 32,          # training batch size (read by the training loop)
    'seed': 0,                 # generator seed: same seed, same data
    'num_train': 2000,
    'num_dev': 300,            # examples of the 'validation' split
    'num_test': 300,
    'min_length': 4,           # words per sentence (verb + 2 nouns per pair + modifiers)
    'max_length': 13,
    'max_pairs': 2,            # noun pairs (animals) per sentence: 1..max_pairs
    'max_modifiers': 4,        # modifiers per pair: 0..max_modifiers (at least one per sentence)
    'num_keys': 8,             # animals (noun classes)
    'num_colours': 4,          # >= 3, so a modifier can have a colour that neither noun of its pair has
    'num_verbs': 4,            # vocabulary: num_verbs + 2 * num_keys * num_colours words
    'pair_rate': 1.0,          # probability that an animal comes as a PAIR of nouns (the
                               # distractor across the verb) rather than a single noun
    'head_side': 'same',       # a modifier's head: the noun of its class on the 'same' side of the
                               # verb, or the one 'across' the verb
    'bucket_boundaries': (),   # padded lengths; empty: one bucket of max_length (one compile)
}


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


def verb_name(v: int) -> str:
  return _name(VERB_NAMES, 'v', v)


def noun_name(key: int, colour: int) -> str:
  """'cat-red': animal `key` in colour `colour`."""
  return f'{_name(KEY_NAMES, "k", key)}-{_name(COLOUR_NAMES, "c", colour)}'


def modifier_name(key: int, colour: int) -> str:
  """"cat's-red": a modifier agreeing with the animal `key`, of colour `colour`."""
  return f'{_name(KEY_NAMES, "k", key)}{MODIFIER_SUFFIX}-{_name(COLOUR_NAMES, "c", colour)}'


def word_list(num_keys: int, num_colours: int, num_verbs: int) -> list[str]:
  """All words of the grammar: verbs, then nouns, then modifiers."""
  return ([verb_name(v) for v in range(num_verbs)]
          + [noun_name(k, c) for k in range(num_keys) for c in range(num_colours)]
          + [modifier_name(k, c) for k in range(num_keys) for c in range(num_colours)])


def parse_word(word: str) -> tuple[str, int, int]:
  """('verb', v, -1), ('noun', key, colour) or ('modifier', key, colour); ValueError otherwise."""
  verb = _index(VERB_NAMES, 'v', word)
  if verb >= 0:
    return 'verb', verb, -1
  animal, dash, colour_name = word.rpartition('-')
  kind = 'noun'
  if animal.endswith(MODIFIER_SUFFIX):
    animal, kind = animal[:-len(MODIFIER_SUFFIX)], 'modifier'
  key, colour = _index(KEY_NAMES, 'k', animal), _index(COLOUR_NAMES, 'c', colour_name)
  if not dash or key < 0 or colour < 0:
    raise ValueError(f'{word!r} is not a word of the {LOADER_NAME} grammar (verbs like '
                     f"{VERB_NAMES[0]!r}, nouns like {noun_name(0, 0)!r}, modifiers like "
                     f'{modifier_name(0, 0)!r})')
  return kind, key, colour


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
                     'pair differ in colour, and modifiers also take colours matching neither)')
  lo, hi = int(cfg['min_length']), int(cfg['max_length'])
  longest = 1 + int(cfg['max_pairs']) * (2 + int(cfg['max_modifiers']))
  if hi < lo:
    raise ValueError(f'config.data.max_length={hi} must be >= config.data.min_length={lo}')
  if hi < 4 or lo > longest:
    raise ValueError(f'config.data.min_length={lo} / max_length={hi}: sentences have between 4 '
                     f'and {longest} words (verb, 2 nouns per pair, >= 1 modifier)')
  boundaries = tuple(int(b) for b in cfg['bucket_boundaries'])
  if boundaries and (list(boundaries) != sorted(set(boundaries)) or boundaries[0] < 1):
    raise ValueError(f'config.data.bucket_boundaries={boundaries} must be increasing positive ints')
  if not 0.0 < float(cfg['pair_rate']) <= 1.0:
    raise ValueError(f'config.data.pair_rate={cfg["pair_rate"]} must be in (0, 1] (label 0 needs '
                     'pairs: without a distractor every colour coincidence is a match)')
  if cfg['head_side'] not in HEAD_SIDES:
    raise ValueError(f'config.data.head_side={cfg["head_side"]!r}; valid: {HEAD_SIDES}')
  cfg['bucket_boundaries'] = boundaries or (hi,)
  return cfg


def _sample_bag(rng: np.random.Generator, *, label: int, num_keys: int, num_colours: int,
                num_verbs: int, max_pairs: int, max_modifiers: int, min_length: int, max_length: int,
                pair_rate: float):
  """The order-free content of a sentence: (verb, keys [A], noun_colours, modifiers).

  `noun_colours[a]` lists the colours of the nouns of animal `a` (two different ones for a pair, one
  for a single noun); `modifiers` is a list of (animal index, colour). Redrawn until the length fits
  and the bag has a word order with label `label`: some modifier of a pair has the colour of a noun
  of its pair (label 1 possible; without one only label 0 would be, and such bags are never used),
  and, for label 0, no modifier of a single noun has its colour (that would force label 1). With
  `pair_rate` 1 the bag does not depend on `label`.
  """
  while True:
    num_animals = int(rng.integers(1, max_pairs + 1))
    paired = rng.random(num_animals) < pair_rate
    counts = rng.integers(0, max_modifiers + 1, num_animals)
    length = 1 + num_animals + int(paired.sum()) + int(counts.sum())
    if not min_length <= length <= max_length or counts.sum() == 0:
      continue
    keys = rng.choice(num_keys, num_animals, replace=False)
    noun_colours = [[int(c) for c in rng.choice(num_colours, 2 if paired[a] else 1, replace=False)]
                    for a in range(num_animals)]
    modifiers = [(a, int(rng.integers(num_colours))) for a in range(num_animals)
                 for _ in range(int(counts[a]))]
    verb = int(rng.integers(num_verbs))
    open_choice = any(paired[a] and c in noun_colours[a] for a, c in modifiers)
    forced_match = any(not paired[a] and c in noun_colours[a] for a, c in modifiers)
    if (open_choice or forced_match) and not (label == 0 and forced_match):
      return verb, keys, noun_colours, modifiers


def generate_sentence(rng: np.random.Generator, *, label: int, num_keys: int, num_colours: int,
                      num_verbs: int, max_pairs: int, max_modifiers: int, min_length: int,
                      max_length: int, head_side: str = 'same', pair_rate: float = 1.0,
                      ) -> tuple[list[str], np.ndarray]:
  """Samples one sentence of the colour-match grammar with the given label (module docstring).

  The bag of words is drawn first (`_sample_bag`; independently of `label` when `pair_rate` is 1).
  Then the word order is drawn uniformly among the orders with that label: the orientation of each
  pair (which of its nouns is the subject), the side of each single noun and of each modifier are
  fair coins, conditioned on the label (label 0: every modifier with a colour of its pair stands
  where its head is the OTHER noun of the pair, by construction; label 1: redrawn until some
  modifier has the colour of its head, probability >= 1/2 per draw); the order within each side is
  a uniform permutation.

  Args:
    rng: numpy random generator (consumed).
    label: 1 (some modifier matches its head's colour) or 0 (none does).
    num_keys, num_colours, num_verbs, max_pairs, max_modifiers, min_length, max_length: grammar
      sizes (see `DEFAULTS`).
    head_side: 'same' or 'across' (see `planted_heads`).
    pair_rate: probability that an animal comes as a pair of nouns rather than a single noun.

  Returns:
    (words: list of str, heads: int32[n] with the planted tree, -1 = ROOT).
  """
  if label not in (0, 1):
    raise ValueError(f'label={label!r} must be 0 or 1')
  if head_side not in HEAD_SIDES:
    raise ValueError(f'head_side={head_side!r}; valid: {HEAD_SIDES}')
  across = int(head_side == 'across')  # a modifier on side s has its head on side s ^ across
  verb, keys, noun_colours, modifiers = _sample_bag(
      rng, label=label, num_keys=num_keys, num_colours=num_colours, num_verbs=num_verbs,
      max_pairs=max_pairs, max_modifiers=max_modifiers, min_length=min_length,
      max_length=max_length, pair_rate=pair_rate)
  num_animals = len(keys)
  while True:
    first_side = rng.integers(0, 2, num_animals)  # the side of the first noun of each animal
    sides = rng.integers(0, 2, len(modifiers))
    # noun_side[a][j]: the side of noun j of animal a (a pair's second noun is across the verb).
    noun_side = [[int(first_side[a]), 1 - int(first_side[a])][:len(noun_colours[a])]
                 for a in range(num_animals)]

    def head_noun(a, side):  # index j of the head noun of a modifier of animal a on `side`
      return noun_side[a].index(side ^ across) if side ^ across in noun_side[a] else 0

    if label == 0:
      for i, (a, c) in enumerate(modifiers):
        if len(noun_colours[a]) == 2 and c in noun_colours[a]:  # head: the other noun of the pair
          sides[i] = noun_side[a][1 - noun_colours[a].index(c)] ^ across
    matched = any(noun_colours[a][head_noun(a, int(s))] == c for (a, c), s in zip(modifiers, sides))
    if int(matched) == label:
      break
  units = [[], []]
  for a in range(num_animals):
    for j, colour in enumerate(noun_colours[a]):
      units[noun_side[a][j]].append(noun_name(int(keys[a]), colour))
  for (a, c), s in zip(modifiers, sides):
    units[int(s)].append(modifier_name(int(keys[a]), c))
  words = ([units[SUBJECT][i] for i in rng.permutation(len(units[SUBJECT]))] + [verb_name(verb)]
           + [units[OBJECT][i] for i in rng.permutation(len(units[OBJECT]))])
  return words, planted_heads(words, head_side)


def planted_heads(words: Sequence[str], head_side: str = 'same') -> np.ndarray:
  """Recovers the planted tree from the token sequence alone (the grammar is deterministic).

  Rules: the verb hangs from ROOT, every noun from the verb, every modifier from the noun of its
  class (animal) on its side of the verb (`head_side='same'`) or on the other side ('across'), or
  from the only noun of its class when there is one noun of its class.

  Args:
    words: a sentence of the grammar.
    head_side: 'same' or 'across' (`config.data.head_side`).

  Returns:
    heads int32[n] (-1 = ROOT).

  Raises:
    ValueError: if the words do not form a sentence of the grammar (not exactly one verb, an animal
      twice on one side of the verb, a modifier without a noun of its class).
  """
  if head_side not in HEAD_SIDES:
    raise ValueError(f'head_side={head_side!r}; valid: {HEAD_SIDES}')
  parsed = [parse_word(w) for w in words]
  verbs = [i for i, (kind, _, _) in enumerate(parsed) if kind == 'verb']
  if len(verbs) != 1:
    raise ValueError(f'a sentence needs exactly one verb, got {len(verbs)}: {list(words)}')
  verb = verbs[0]
  nouns: dict[tuple[int, int], int] = {}  # (side, key) -> position
  for i, (kind, key, _) in enumerate(parsed):
    if kind == 'noun':
      side = SUBJECT if i < verb else OBJECT
      if (side, key) in nouns:
        raise ValueError(f'two nouns of class {_name(KEY_NAMES, "k", key)!r} on the same side of the '
                         f'verb (at {nouns[side, key]} and {i}): {list(words)}')
      nouns[side, key] = i
  heads = np.full((len(words),), verb, np.int32)
  heads[verb] = -1
  for i, (kind, key, _) in enumerate(parsed):
    if kind == 'modifier':
      side = (SUBJECT if i < verb else OBJECT) ^ int(head_side == 'across')
      if (side, key) not in nouns and (1 - side, key) in nouns:
        side = 1 - side  # the only noun of its class
      if (side, key) not in nouns:
        raise ValueError(f'modifier {words[i]!r} at {i} has no noun {_name(KEY_NAMES, "k", key)!r} '
                         f'to agree with: {list(words)}')
      heads[i] = nouns[side, key]
  return heads


def label_from_tree(words: Sequence[str], heads: np.ndarray) -> int:
  """The label read off a tree: 1 iff some modifier hangs from a noun of the same colour.

  Works for any `heads` (e.g. induced trees), not only the planted one.
  """
  parsed = [parse_word(w) for w in words]
  for m, h in enumerate(np.asarray(heads)):
    if h >= 0 and parsed[m][0] == 'modifier' and parsed[int(h)][0] == 'noun' \
        and parsed[int(h)][2] == parsed[m][2]:
      return 1
  return 0


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
  sizes['head_side'] = str(cfg['head_side'])
  sizes['pair_rate'] = float(cfg['pair_rate'])
  out = []
  for _ in range(num_examples):
    label = int(rng.integers(2))
    words, heads = generate_sentence(rng, label=label, **sizes)
    out.append((words, heads, label))
  return out


@registry.register(LOADER_NAME)
def load(config) -> core.TaskData:
  """Generates the three splits and encodes them (kind 'sentence', gold `heads` in every example).

  Args:
    config: the `config.data` ConfigDict (keys: see `DEFAULTS`; unknown keys are an error).

  Returns:
    TaskData(kind='sentence', vocab over the whole grammar, label_names=['no_match', 'match'],
    splits train/validation/test of sizes num_train/num_dev/num_test).
  """
  cfg = validate_config(config)
  vocab = core.Vocabulary(word_list(int(cfg['num_keys']), int(cfg['num_colours']),
                                    int(cfg['num_verbs'])))
  splits = {}
  for index, (name, size) in enumerate((('train', 'num_train'), ('validation', 'num_dev'),
                                        ('test', 'num_test'))):
    raw = generate_split(int(cfg[size]), int(cfg['seed']), index, cfg)
    examples = [{'tokens': vocab.encode(w), 'heads': h, 'label': y} for w, h, y in raw]
    splits[name] = core.Split(name, 'sentence', examples,
                              bucket_boundaries=cfg['bucket_boundaries'])
  return core.TaskData(kind='sentence', vocab=vocab, label_names=list(LABEL_NAMES), splits=splits)
