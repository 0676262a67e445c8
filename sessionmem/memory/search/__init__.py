"""Search over the index: query terms, keyword and vector retrieval, calibration, ranking and the hybrid
merge."""
