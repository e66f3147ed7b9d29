"""kms headless core, in layers: store -> config -> vault -> index -> activity -> writes -> mcp.

Each package imports only the ones below it; only ``server.mcp`` imports the MCP SDK; nothing here
imports typer, rich, textual, kmscli or tui (import-linter contracts in pyproject.toml, and
tests/unit/test_import_hygiene.py at run time). docs/ARCHITECTURE.md says what each package owns.
"""
