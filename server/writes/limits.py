"""Every size limit of the write tools, defined once.

The tools' input models (``server.mcp.tools.write_tools``), their descriptions and the
operations (``server.writes.operations``) all read these, so what an agent is promised is
what is enforced. Sizes are decimal (1 KB = 1,000 bytes), like the read payload cap.
"""

from __future__ import annotations

MAX_CREATE_BYTES = 100_000  # a new note's content (UTF-8 bytes)
MAX_INSERT_BYTES = 50_000  # text added by kms_append / kms_insert_at (UTF-8 bytes)
MAX_TAGS = 50  # tags given to kms_create (and the merged tags: list it writes)
MAX_TITLE_CHARS = 300
# A note named by an agent: its id, title, path or vault:path, a link target, a folder. The one limit on a
# name (docs/limits.md): above the longest path a real vault holds (Linux's PATH_MAX is 4,096 bytes, a file
# name 255), it keeps a refusal's echo and a provenance row bounded.
MAX_NOTE_NAME_CHARS = 1_024
MAX_FOLDER_CHARS = MAX_NOTE_NAME_CHARS
MAX_NAME_CHARS = 64  # a vault name
MAX_VERSION_CHARS = 128
MAX_SEPARATOR_CHARS = 20  # kms_append's separator
MAX_HEADING_CHARS = 500  # a heading named by kms_append / kms_insert_at
MAX_QUERY_CHARS = 1_000  # the text kms_insert_at's afterBlockContaining looks for
MAX_FACT_CHARS = 1_000  # one fact kms_remember records (one list item)
MAX_CATEGORY_CHARS = 60  # its category (a heading of the memory note)


def kb(limit: int) -> str:
    """``50_000`` -> ``"50 KB"``: how descriptions and messages state a byte limit."""
    return f"{limit // 1000} KB"


def check_bytes(value: str, limit: int, name: str) -> str:
    """``value`` if its UTF-8 form fits ``limit`` bytes; ``ValueError`` saying by how much otherwise (the
    input models raise it inside their validators, so it answers ``invalid-input``)."""
    size = len(value.encode("utf-8"))
    if size > limit:
        raise ValueError(f"{name} is {size} bytes; at most {limit} bytes ({kb(limit)})")
    return value
