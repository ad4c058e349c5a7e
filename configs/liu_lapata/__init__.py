"""Configs reproducing Liu & Lapata (2018): Table 1 (snli.py), Table 4 (yelp13.py, imdb.py,
czech_movies.py, debates.py), our own document (debian.py) and sentence (sst_binary.py, sst_fine.py)
tasks. Each file's `get_config(options)` documents its options; `variants` trains the paper's
attention variants side by side."""
