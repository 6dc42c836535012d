"""Tests of the sampler layer."""
