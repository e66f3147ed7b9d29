"""Which notes wait for their embeddings, asked without loading the embedding stack (numpy, the model).

``kms index`` asks this after every run: only when something is pending does it import the
pipeline and load the model, so a no-change ``kms index`` costs one count query, not ~0.15 s of
imports and seconds of model loading.
"""

from __future__ import annotations

import apsw

MODEL_NAME = "sentence-transformers/all-MiniLM-L6-v2"  # the embedding model (server.index.embed.model)

PENDING_COUNT = """
SELECT count(*) FROM notes n LEFT JOIN note_embed_state s ON s.rid = n.rid
WHERE n.hidden_at IS NULL
  AND (s.rid IS NULL OR s.content_hash != n.content_hash OR s.title != n.title OR s.model != ?)
"""


def pending_count(conn: apsw.Connection) -> int:
    """Visible notes whose current text (or title, or the model) has no embeddings yet."""
    return int(next(conn.execute(PENDING_COUNT, (MODEL_NAME,)))[0])
