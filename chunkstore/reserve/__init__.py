"""The reserve policy."""
