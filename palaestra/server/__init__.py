"""Network services: the retrieval server (``palaestra serve-retriever``)."""
