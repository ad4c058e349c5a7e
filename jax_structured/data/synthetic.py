"""The built-in synthetic data of the default job: sentences with PLANTED dependency trees.

Registered as the data loader `synthetic_trees` (`config.data.name = 'synthetic_trees'`). Everything is
generated here, deterministically from `config.data.seed`; nothing is downloaded.

The grammar ("agreement votes")
-------------------------------
A sentence has one verb (`sees`, `likes`, ...), an even number of nouns (animals: `cat`, `dog`, ...,
distinct within a sentence), half of them before the verb (*subjects*) and half after it (*objects*),
and modifiers that AGREE with a noun (`cat's` agrees with `cat`) scattered anywhere in the sentence
(free word order, as in the Czech data of the paper). The planted tree is read off the tokens:

* the verb hangs from ROOT (`heads = -1`);
* every noun hangs from the verb;
* every modifier hangs from the noun it agrees with (wherever that is: the trees are mostly
  non-projective, height 3).

The label asks which side of the verb "wins the vote": 1 (`subjects`) when the subject nouns have
more modifiers in total than the object nouns, 0 (`objects`) otherwise (the total is odd, so there is
no tie). The bag of words says nothing about it: given the bag, the split of the nouns into the two
sides is uniform over balanced splits, and the mirrored split (every subject swapped with an object)
is as likely and has the opposite label, so every function of the bag of words is at chance, while
counting the children of the nouns on each side of the verb in the planted tree gets 100%. The label
is a LINEAR function of the tree (a sum over arcs of the side of the head), which is what the
structured attention of Liu & Lapata (2018, eqs. 16-18) computes with sum/mean pooling: the parent
context p_j of a modifier is the semantic vector of the noun it attends to, so the label can only be
read off by modifiers attending to their planted heads (a BiLSTM alone has to remember, for every
noun, on which side of the verb it stood).

Examples follow `core` (kind 'sentence'): `{'tokens': int32[n], 'label': int, 'heads': int32[n]}`.
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from jax_structured.data import core
from jax_structured.data import registry

LOADER_NAME = 'synthetic_trees'
LABEL_NAMES = ['objects', 'subjects']

KEY_NAMES = ('cat', 'dog', 'fox', 'owl', 'bee', 'elk', 'emu', 'yak', 'ant', 'bat', 'cow', 'eel',
             'hen', 'jay', 'ram', 'rat')
VERB_NAMES = ('sees', 'likes', 'finds', 'meets', 'feeds', 'hears', 'helps', 'calls')
MODIFIER_SUFFIX = "'s"

# Every key a `config.data` section of this loader may have, with its default.
DEFAULTS: dict[str, Any] = {
    'name': LOADER_NAME,
    'batch_size': 32,          # training batch size (read by the training loop)
    'seed': 0,                 # generator seed: same seed, same data
    'num_train': 2000,
    'num_dev': 300,            # examples of the 'validation' split
    'num_test': 300,
    'min_length': 4,           # words per sentence (verb + nouns + modifiers)
    'max_length': 13,
    'max_nouns': 4,            # even, >= 2: nouns per sentence are 2, 4, ..., max_nouns
    'max_modifiers': 3,        # modifiers per noun are 0..max_modifiers
    'num_keys': 8,             # animals (vocabulary: 2 * num_keys + num_verbs words)
    'num_verbs': 4,
    'bucket_boundaries': (),   # padded lengths; empty: one bucket of max_length (one compile)
}


def default_config():
  """A `ml_collections.ConfigDict` with every key of this loader at its default value."""
  import ml_collections  # pylint: disable=g-import-not-at-top
  return ml_collections.ConfigDict(dict(DEFAULTS))


def key_name(k: int) -> str:
  return KEY_NAMES[k] if k < len(KEY_NAMES) else f'k{k}'


def verb_name(v: int) -> str:
  return VERB_NAMES[v] if v < len(VERB_NAMES) else f'v{v}'


def modifier_name(k: int) -> str:
  return key_name(k) + MODIFIER_SUFFIX


def word_list(num_keys: int, num_verbs: int) -> list[str]:
  """All words of the grammar: verbs, nouns, modifiers."""
  return ([verb_name(v) for v in range(num_verbs)] + [key_name(k) for k in range(num_keys)]
          + [modifier_name(k) for k in range(num_keys)])


def parse_word(word: str) -> tuple[str, int]:
  """('verb', v), ('noun', key) or ('modifier', key) for a word of the grammar; ValueError otherwise."""
  kind = 'noun'
  if word.endswith(MODIFIER_SUFFIX):
    word, kind = word[:-len(MODIFIER_SUFFIX)], 'modifier'
  if kind == 'noun' and word in VERB_NAMES:
    return 'verb', VERB_NAMES.index(word)
  if kind == 'noun' and word[:1] == 'v' and word[1:].isdigit() and int(word[1:]) >= len(VERB_NAMES):
    return 'verb', int(word[1:])
  if word in KEY_NAMES:
    return kind, KEY_NAMES.index(word)
  if word[:1] == 'k' and word[1:].isdigit() and int(word[1:]) >= len(KEY_NAMES):
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
  for key in ('num_dev', 'num_test', 'seed', 'max_modifiers'):
    if int(cfg[key]) < 0:
      raise ValueError(f'config.data.{key}={cfg[key]} must be >= 0')
  for key in ('num_train', 'batch_size', 'num_verbs'):
    if int(cfg[key]) < 1:
      raise ValueError(f'config.data.{key}={cfg[key]} must be >= 1')
  max_nouns = int(cfg['max_nouns'])
  if max_nouns < 2 or max_nouns % 2:
    raise ValueError(f'config.data.max_nouns={max_nouns} must be even and >= 2 (half subjects, '
                     'half objects)')
  if int(cfg['num_keys']) < max_nouns:
    raise ValueError(f'config.data.num_keys={cfg["num_keys"]} must be >= config.data.max_nouns='
                     f'{max_nouns} (nouns are distinct within a sentence)')
  if int(cfg['max_modifiers']) < 1:
    raise ValueError(f'config.data.max_modifiers={cfg["max_modifiers"]} must be >= 1 (the label '
                     'counts modifiers)')
  lo, hi = int(cfg['min_length']), int(cfg['max_length'])
  if hi < lo:
    raise ValueError(f'config.data.max_length={hi} must be >= config.data.min_length={lo}')
  if hi < 4 or lo > 1 + max_nouns * (1 + int(cfg['max_modifiers'])):
    raise ValueError(f'config.data.min_length={lo} / max_length={hi}: sentences have between 4 '
                     f'and {1 + max_nouns * (1 + int(cfg["max_modifiers"]))} words '
                     '(verb, >= 2 nouns, an odd number of modifiers)')
  boundaries = tuple(int(b) for b in cfg['bucket_boundaries'])
  if boundaries and (list(boundaries) != sorted(set(boundaries)) or boundaries[0] < 1):
    raise ValueError(f'config.data.bucket_boundaries={boundaries} must be increasing positive ints')
  cfg['bucket_boundaries'] = boundaries or (hi,)
  return cfg


def generate_sentence(rng: np.random.Generator, *, label: int, num_keys: int, num_verbs: int,
                      max_nouns: int, max_modifiers: int, min_length: int, max_length: int,
                      ) -> tuple[list[str], np.ndarray]:
  """Samples one sentence of the agreement-votes grammar (see the module docstring).

  The nouns (count uniform in 2, 4, ..., max_nouns), their modifier counts (uniform in
  0..max_modifiers, redrawn until the total is odd and the length fits) and a balanced split into
  subjects and objects are drawn; if the split's label is not `label`, the mirrored split is used
  (same probability, same bag of words). Modifiers are inserted at uniform random positions.

  Args:
    rng: numpy random generator (consumed).
    label: 1 (subjects have more modifiers) or 0 (objects have more).
    num_keys, num_verbs, max_nouns, max_modifiers, min_length, max_length: grammar sizes.

  Returns:
    (words: list of str, heads: int32[n] with the planted tree, -1 = ROOT).
  """
  while True:
    num_nouns = 2 * int(rng.integers(1, max_nouns // 2 + 1))
    counts = rng.integers(0, max_modifiers + 1, num_nouns)
    length = 1 + num_nouns + int(counts.sum())
    if counts.sum() % 2 == 1 and min_length <= length <= max_length:
      break
  keys = [int(k) for k in rng.choice(num_keys, num_nouns, replace=False)]
  subjects = np.zeros(num_nouns, bool)
  subjects[rng.choice(num_nouns, num_nouns // 2, replace=False)] = True
  if int(counts[subjects].sum() > counts[~subjects].sum()) != label:
    subjects = ~subjects  # the mirrored split: same probability, opposite label
  order = [int(i) for i in rng.permutation(num_nouns)]
  units = ([('noun', i) for i in order if subjects[i]] + [('verb', -1)]
           + [('noun', i) for i in order if not subjects[i]])
  for i in range(num_nouns):
    for _ in range(int(counts[i])):
      units.insert(int(rng.integers(0, len(units) + 1)), ('modifier', i))
  verb = verb_name(int(rng.integers(num_verbs)))
  words = [verb if kind == 'verb' else key_name(keys[i]) if kind == 'noun'
           else modifier_name(keys[i]) for kind, i in units]
  return words, planted_heads(words)


def planted_heads(words: Sequence[str]) -> np.ndarray:
  """Recovers the planted tree from the token sequence alone (the grammar is deterministic).

  Rules: the verb hangs from ROOT, every noun from the verb, every modifier from the noun it agrees
  with.

  Args:
    words: a sentence of the grammar.

  Returns:
    heads int32[n] (-1 = ROOT).

  Raises:
    ValueError: if the words do not form a sentence of the grammar (not exactly one verb, a noun
      occurring twice, a modifier without its noun).
  """
  parsed = [parse_word(w) for w in words]
  verbs = [i for i, (kind, _) in enumerate(parsed) if kind == 'verb']
  if len(verbs) != 1:
    raise ValueError(f'a sentence needs exactly one verb, got {len(verbs)}: {list(words)}')
  nouns: dict[int, int] = {}
  for i, (kind, key) in enumerate(parsed):
    if kind == 'noun':
      if key in nouns:
        raise ValueError(f'noun {words[i]!r} occurs twice (at {nouns[key]} and {i}): {list(words)}')
      nouns[key] = i
  heads = np.full((len(words),), verbs[0], np.int32)
  heads[verbs[0]] = -1
  for i, (kind, key) in enumerate(parsed):
    if kind == 'modifier':
      if key not in nouns:
        raise ValueError(f'modifier {words[i]!r} at {i} has no noun {key_name(key)!r} to agree '
                         f'with: {list(words)}')
      heads[i] = nouns[key]
  return heads


def label_from_tree(words: Sequence[str], heads: np.ndarray) -> int:
  """The label read off a tree: 1 iff the nouns left of the verb have more dependents than those right
  of it (dependents of nouns counted through the given `heads`, whatever they are)."""
  heads = np.asarray(heads)
  verb = [i for i, w in enumerate(words) if parse_word(w)[0] == 'verb'][0]
  votes = 0
  for h in heads:
    if h >= 0 and parse_word(words[int(h)])[0] == 'noun':
      votes += 1 if h < verb else -1
  return int(votes > 0)


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
  out = []
  for _ in range(num_examples):
    label = int(rng.integers(2))
    words, heads = generate_sentence(
        rng, label=label, num_keys=int(cfg['num_keys']), num_verbs=int(cfg['num_verbs']),
        max_nouns=int(cfg['max_nouns']), max_modifiers=int(cfg['max_modifiers']),
        min_length=int(cfg['min_length']), max_length=int(cfg['max_length']))
    out.append((words, heads, label))
  return out


@registry.register(LOADER_NAME)
def load(config) -> core.TaskData:
  """Generates the three splits and encodes them (kind 'sentence', gold `heads` in every example).

  Args:
    config: the `config.data` ConfigDict (keys: see `DEFAULTS`; unknown keys are an error).

  Returns:
    TaskData(kind='sentence', vocab over the whole grammar, label_names=['objects', 'subjects'],
    splits train/validation/test of sizes num_train/num_dev/num_test).
  """
  cfg = validate_config(config)
  vocab = core.Vocabulary(word_list(int(cfg['num_keys']), int(cfg['num_verbs'])))
  splits = {}
  for index, (name, size) in enumerate((('train', 'num_train'), ('validation', 'num_dev'),
                                        ('test', 'num_test'))):
    raw = generate_split(int(cfg[size]), int(cfg['seed']), index, cfg)
    examples = [{'tokens': vocab.encode(w), 'heads': h, 'label': y} for w, h, y in raw]
    splits[name] = core.Split(name, 'sentence', examples,
                              bucket_boundaries=cfg['bucket_boundaries'])
  return core.TaskData(kind='sentence', vocab=vocab, label_names=list(LABEL_NAMES), splits=splits)
