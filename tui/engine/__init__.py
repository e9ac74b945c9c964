"""The headless memory engine: store, chunker, index, embeddings, search, injection.

Nothing in this package imports Textual.
"""
