"""The training task 'parse' of the biaffine tree-CRF parser (`models.parser`, issue 5).

It lives in the training layer (it subclasses `tasks.Task`), so that `models.parser` imports nothing
above `models`; the pure loss and metric functions it calls stay in `models.parser`. The checks of the
config against the data (`check_data_sizes`) and the punctuation tags (`data.sentences`) are here, where
the model meets the data. `training/__init__.py` imports this module, which registers the task.
"""
from jax_structured.data import sentences
from jax_structured.data import text
from jax_structured.models import parser
from jax_structured.nn import exactness
from jax_structured.training import tasks

_RESERVED_NAMES = ('<pad>', '<unk>')  # ids 0 and 1 of the data's tag and relation tables


def check_data_sizes(model_config, *, tag_vocab=None, relation_names=None, num_classes=0) -> None:
  """Checks `config.model.num_tags` / `num_relations` against the data's vocabularies.

  The model's tag and relation tables must match the data exactly: a smaller table would give NaN
  losses (out-of-range ids), a larger one would let the tagger predict ids with no tag name. The
  model never predicts the first `parser.RESERVED_LABELS` ids, so the data's tables must reserve them
  (`<pad>`, `<unk>` of `data.Vocabulary`).

  Args:
    model_config: `config.model` (or a mapping; None: no keys).
    tag_vocab: the data's tag `Vocabulary` or list of tag names (None: not checked).
    relation_names: the data's relation names (None: not checked).
    num_classes: the data's number of labels (the relations when `num_relations` is 0).

  Raises:
    ValueError naming the config key and the value to set.
  """
  model_config = model_config if model_config is not None else {}
  num_tags = int(model_config.get('num_tags', 0))
  tag_names = None if tag_vocab is None else list(getattr(tag_vocab, 'tokens', tag_vocab))
  if tag_names is not None and num_tags and len(tag_names) != num_tags:
    raise ValueError(f'config.model.num_tags={num_tags} but the data has {len(tag_names)} tags '
                     f'(<pad>, <unk> and {len(tag_names) - 2} seen in train): set '
                     f'config.model.num_tags={len(tag_names)}')
  num_relations = int(model_config.get('num_relations', 0)) or int(num_classes)
  if relation_names is not None and len(relation_names) != num_relations:
    raise ValueError(f'config.model.num_relations={num_relations} but the data has '
                     f'{len(relation_names)} relations (incl. <pad>, <unk>): set '
                     f'config.model.num_relations={len(relation_names)}')
  for what, names in (('tag', tag_names if num_tags else None), ('relation', relation_names)):
    if names is not None and len(names) > parser.RESERVED_LABELS and (
        tuple(names[:parser.RESERVED_LABELS]) != _RESERVED_NAMES):
      raise ValueError(f"the data's {what} names start with {list(names[:parser.RESERVED_LABELS])}, "
                       f'not {list(_RESERVED_NAMES)}: the parser never predicts those first ids')


def check_characters(config) -> None:
  """Checks that a parser reading characters gets them: `data.max_chars` and `model.num_chars`.

  Raises:
    ValueError naming the config key and the value to set.
  """
  model_config = config.get('model') or {}
  data_config = config.get('data') or {}
  char_dim = int(model_config.get('char_embedding_dim', 0))
  if char_dim <= 0:
    return
  if not int(data_config.get('max_chars', 0)):
    raise ValueError(f'config.model.char_embedding_dim={char_dim} needs character ids in the batches: '
                     'set config.data.max_chars > 0 (e.g. 20)')
  if int(model_config.get('num_chars', 0)) != text.NUM_CHAR_IDS:
    raise ValueError(f'config.model.num_chars={model_config.get("num_chars", 0)} but the character ids '
                     f'of data.text.char_ids take {text.NUM_CHAR_IDS} values: set '
                     f'config.model.num_chars={text.NUM_CHAR_IDS}')


@tasks.register('parse')
class ParseTask(tasks.Task):
  """Training-platform task 'parse': tree-CRF (or local) loss; UAS/LAS of `trees.mst` trees.

  Constructed with the run config (reads `config.model.loss`, `tag_loss_weight` and `decoding`) and,
  when the caller has it, the task data, whose `extras['tag_vocab']` gives the PUNCT/SYM ids for the
  punctuation-free scores (without it, only the punctuation-included 'uas'/'las' are reported, the
  CoNLL 2018 shared-task convention, which is also the dev metric).
  """
  dev_metric = 'las'
  higher_is_better = True

  def __init__(self, config=None, task_data=None, *, tag_vocab=None):
    super().__init__(config)
    model_config = config.get('model') if config is not None else None
    model_config = model_config if model_config is not None else {}
    self.loss = model_config.get('loss', 'crf')
    if self.loss not in parser.LOSSES:
      raise ValueError(f'config.model.loss={self.loss!r}; expected one of {parser.LOSSES}')
    self.tag_loss_weight = float(model_config.get('tag_loss_weight', 1.0))
    self.decoding = model_config.get('decoding', 'pipeline')
    if self.decoding not in parser.DECODINGS:
      raise ValueError(f'config.model.decoding={self.decoding!r}; expected one of {parser.DECODINGS}')
    if config is not None:
      check_characters(config)
    extras = (getattr(task_data, 'extras', None) or {}) if task_data is not None else {}
    if tag_vocab is None:
      tag_vocab = extras.get('tag_vocab')
    self.punct_tag_ids = sentences.punct_tag_ids(tag_vocab) if tag_vocab is not None else None
    check_data_sizes(model_config, tag_vocab=tag_vocab, relation_names=extras.get('relation_names'),
                     num_classes=getattr(task_data, 'num_classes', 0))

  def loss_and_metrics(self, outputs, batch):
    """(loss, {'loss', 'arc_nll', 'rel_nll', 'tag_nll', ...: (sum, count)}) for one batch."""
    return parser.loss_and_metrics(outputs, batch, loss=self.loss,
                                   tag_loss_weight=self.tag_loss_weight)

  def deferred_loss_and_metrics(self, outputs, batch, flagged):
    """`loss_and_metrics` without the `flagged` examples and the sentences whose CRF log Z the LU
    error estimate flags (`nn.exactness`; recomputed by the training step's exact program)."""
    if self.loss != 'crf':
      return super().deferred_loss_and_metrics(outputs, batch, flagged)
    log_z, own = exactness.defer_log_partition(parser.crf_log_partition(outputs, batch['lengths']))
    own = own & (tasks.example_weights(batch) > 0)
    flagged = own if flagged is None else flagged | own
    loss, metrics = parser.loss_and_metrics(outputs, tasks.without_examples(batch, flagged),
                                            loss=self.loss, tag_loss_weight=self.tag_loss_weight,
                                            log_z=log_z)
    return loss, metrics, flagged

  def eval_metrics(self, outputs, batch, intermediates=None):
    """UAS/LAS (+ punctuation-free, UPOS accuracy) of trees decoded on device (`config.model.decoding`)."""
    del intermediates
    return parser.attachment_metrics(outputs, batch, punct_tag_ids=self.punct_tag_ids,
                                     decoding=self.decoding)
