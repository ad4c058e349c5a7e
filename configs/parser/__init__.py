"""Configs of the biaffine tree-CRF dependency parser (`parser.biaffine`, task 'parse')."""
