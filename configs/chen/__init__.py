"""Configs reproducing Chen et al. (2017), AP-DCNN: Table 1 on SST (sst.py), every row in the same code;
`get_config(options)` documents the options."""
