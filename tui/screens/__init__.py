"""Screens: the dashboard, one invocation in full, review (revert), note, reads, settings, help."""
