"""Knowledge bases for the RAM2C expert groups: loading and chunking sources, embedding (local
sentence-transformers or FlagEmbedding BGE-M3), the Chroma store, query rewriting, reciprocal-rank
fusion, reranking and retrieval-quality scoring. Entry points: :func:`service.run_build_kb` (the
``build_kb`` stage) and :func:`service.open_retriever` (what the expert groups query)."""
