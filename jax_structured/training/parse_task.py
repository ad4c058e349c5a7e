"""The training task 'parse' of the biaffine tree-CRF parser (`models.parser`, issue 5).

It lives in the training layer (it subclasses `tasks.Task`), so that `models.parser` imports nothing
above `models`; the pure loss and metric functions it calls stay in `models.parser`.
`training/__init__.py` imports this module, which registers the task.
"""
from jax_structured.models import parser
from jax_structured.nn import exactness
from jax_structured.training import tasks


@tasks.register('parse')
class ParseTask(tasks.Task):
  """Training-platform task 'parse': tree-CRF (or local) loss; UAS/LAS of `trees.mst` trees.

  Constructed with the run config (reads `config.model.loss` and `config.model.tag_loss_weight`) and,
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
    data_config = (config.get('data') if config is not None else None) or {}
    if int(model_config.get('char_dim', 0)) > 0 and not int(data_config.get('max_chars', 0)):
      raise ValueError(f'config.model.char_dim={model_config.get("char_dim")} needs character ids in '
                       'the batches: set config.data.max_chars > 0 (e.g. 20)')
    extras = (getattr(task_data, 'extras', None) or {}) if task_data is not None else {}
    if tag_vocab is None:
      tag_vocab = extras.get('tag_vocab')
    self.punct_tag_ids = parser.punct_tag_ids(tag_vocab) if tag_vocab is not None else None
    parser.check_data_sizes(model_config, tag_vocab=tag_vocab,
                     relation_names=extras.get('relation_names'),
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
    """UAS/LAS (+ punctuation-free, UPOS accuracy) of Chu-Liu-Edmonds trees, decoded on device."""
    del intermediates
    return parser.attachment_metrics(outputs, batch, punct_tag_ids=self.punct_tag_ids)
