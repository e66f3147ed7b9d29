"""The write path: limits, compare-and-swap, operations, the one guard and revert."""
