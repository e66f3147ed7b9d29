"""Local embeddings: model location and loading, note chunking, and the embedding pipeline.

Importing this package loads numpy (the model holder and the pipeline need it at module level), but
not onnxruntime: that waits until a model is loaded. A caller that only asks what is pending or where
the model is imports ``server.index.embed_pending`` instead, which loads neither.
"""

from server.index.embed.chunker import Chunk, chunk_note
from server.index.embed.model import (
    DIM,
    MODEL_NAME,
    Embedder,
    ModelNotReady,
    install_model,
    installed_model_dir,
    locate_model,
    model_status,
)
from server.index.embed.pipeline import (
    BackgroundEmbedder,
    EmbedReport,
    embed_notes,
    embed_pending,
    embed_stats,
    pending_count,
    prune_embeddings,
)

__all__ = [
    "DIM",
    "MODEL_NAME",
    "BackgroundEmbedder",
    "Chunk",
    "EmbedReport",
    "Embedder",
    "ModelNotReady",
    "chunk_note",
    "embed_notes",
    "embed_pending",
    "embed_stats",
    "install_model",
    "installed_model_dir",
    "locate_model",
    "model_status",
    "pending_count",
    "prune_embeddings",
]
