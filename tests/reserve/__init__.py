"""Tests of the reserve layer."""
