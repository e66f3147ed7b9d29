"""kms headless core: store, parser, indexer, search, tools and the MCP adapter.

Nothing in this package may import typer, rich's console front end or textual
(tests/test_import_hygiene.py enforces it).
"""
