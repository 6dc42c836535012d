"""Testing aids."""
