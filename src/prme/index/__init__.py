"""An owner's search index: column arrays, the CSR entity graph, the approximate vector
segments, BM25's formula and the saved index files. Storage builds and saves it, retrieval
searches it; both import it, and it imports neither."""
