"""TEST DOUBLE of ``nexent.memory.providers`` (see the package docstring)."""
