"""kms headless core, in layers: store -> config -> vault -> index -> activity -> writes -> mcp.

Each package imports only the ones below it; only ``server.mcp`` imports the MCP SDK; nothing here
imports typer, rich, textual, kmscli or tui (import-linter contracts in pyproject.toml, and
tests/unit/test_import_hygiene.py at run time). docs/ARCHITECTURE.md says what each package owns.
"""

DISTRIBUTION = "kms-notes"  # the name on PyPI ("kms" there is another project; the command stays `kms`)


def installed_version() -> str | None:
    """kms's version as installed, or None when run from a source tree that was never installed."""
    # deferred: importlib.metadata only when the version is asked for, not at every import of server
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(DISTRIBUTION)
    except PackageNotFoundError:
        return None
