"""Tests of the swarm layer."""
