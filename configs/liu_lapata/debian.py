r"""The Liu & Lapata (2018) hierarchical document model on Debian package descriptions (16 sections).

  python -m launch.train --config=configs/liu_lapata/debian.py --workdir=/tmp/debian
  python -m launch.train --config=configs/liu_lapata/debian.py:both --workdir=/tmp/debian_both

Data: ../shared/data/debian_descriptions (Debian package descriptions, 16 section labels; see
/work/shared/data/PROVENANCE.md), read with the `text_classification` loader and split into
sentences (`split_sentences=True`, kind 'document'). The path is relative to the repository root
(run from there). No published result exists: this is the paper's document model on our own data.

Options, model and training (sec. 4.2), paper figures: configs/liu_lapata/__init__.py.
"""
from configs import liu_lapata

get_config = liu_lapata.document_task('debian')
