"""The reference VLA: a small flow-matching vision-language-action model (see README.md).

Submodules import torch; this package file does not, so ``import edge.vla.spec`` stays light.
"""
