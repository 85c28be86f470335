"""Downstream tasks of the encoder: dataset loaders and protocols
(device mapping, thread coarsening); the heads arrive with their issues."""
