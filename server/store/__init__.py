"""Connections and named migrations: the bottom layer."""
