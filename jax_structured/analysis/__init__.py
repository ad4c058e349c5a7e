"""Analysis of trained workdirs: restore a run, run its model, decode and draw what it learned.

The layer above `training` (it restores workdirs with `training.load_trained`) and below `launch`::

  `induce_trees(workdir, split)`       trees of a structured-attention model: CoNLL-U, Table 5/6
                                       statistics, pictures (Liu & Lapata 2018, sec. 4.3)
  `render_attention(workdir, split)`   LSTMN intra-attention pictures (Cheng et al. 2016, Figs. 4-5)
  `translate.translate_file(workdir, input)`  beam-search translations of a translation run
                                       (Yu et al. 2018 Table 2b), BLEU against a reference
  `show_boundaries(workdir, split)`    MHS-RNN / HM-RNN phrase boundaries: lengths, word classes,
                                       pictures (Luo & Zhu sec. IV-D, Fig. 5, Table II)
  `predict.Predictor(workdir)`        a trained classifier on new text: `predict(texts)` (labels,
                                       probabilities, trees), `encode(texts)` (vectors), `trees(texts)`
                                       (launch.predict, launch.encode)
  `parsing.parse(trained, sentences)`  a trained parser's trees of sentences, batched on device
  `parsing.parse_file(workdir, ...)`   a trained parser's CoNLL-U of a file (launch.parse)
  `parsing.annotate(workdir, data)`    a dataset's heads cache for `config.data.trees` (launch.parse
                                       --annotate; Yu et al. 2018's supervised-tree rows)

Pictures are drawn by `viz` from plain arrays. `training.train_and_evaluate(...,
induce_trees=analysis.induce_trees)` draws the trees after training when `config.train.render_trees`.
"""
from jax_structured.analysis import attention
from jax_structured.analysis import boundaries
from jax_structured.analysis import induce
from jax_structured.analysis import parsing
from jax_structured.analysis import predict
from jax_structured.analysis import raw_text
from jax_structured.analysis import translate
from jax_structured.analysis.attention import render_attention
from jax_structured.analysis.boundaries import show_boundaries
from jax_structured.analysis.induce import induce_trees
from jax_structured.analysis.induce import tree_statistics
from jax_structured.analysis.predict import Predictor

__all__ = ['Predictor', 'attention', 'boundaries', 'induce', 'induce_trees', 'parsing', 'predict',
           'raw_text', 'render_attention', 'show_boundaries', 'translate', 'tree_statistics']
