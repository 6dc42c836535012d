"""Tests of the transfer layer."""
