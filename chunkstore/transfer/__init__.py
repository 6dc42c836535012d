"""Moving reserves in and out."""
