"""TEST DOUBLE of ``nexent.memory`` (see the package docstring)."""
