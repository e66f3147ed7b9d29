"""kms command line: thin Typer adapters over the headless core in ``server``."""
