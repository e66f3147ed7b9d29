"""The index over the files: indexer, watcher, search, semantic search, embeddings, listings."""
