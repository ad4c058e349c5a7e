"""A CPU-sized parser config (tests, smoke runs): `configs/parser/ewt.py` with the 'tiny' option.

python -m launch.train --config=configs/parser/ewt_tiny.py --workdir=/tmp/parser_tiny
Tests override `data.manual_dir` / `data.data_dir` to a tiny CoNLL-U treebank of their own.
ewt.py is loaded by file path (not as a sibling package import), so this file works from any
working directory.
"""
import importlib.util
import os

import ml_collections


def _ewt():
  path = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'ewt.py')
  spec = importlib.util.spec_from_file_location('_configs_parser_ewt', path)
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  return module


def get_config() -> ml_collections.ConfigDict:
  return _ewt().get_config('tiny')
