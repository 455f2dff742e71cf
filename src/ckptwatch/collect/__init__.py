"""Collecting on the cluster: the node collector (``collector``), the per-rank checkpoint
recorder for training code (``recorder``) and adapters for PyTorch DCP and training logs
(``adapters``). ``recorder`` and ``adapters`` use the standard library only, and so does this
package's import."""
