"""The test suite, one package per layer (so helpers import as ``tests.<layer>.helpers``)."""
