"""Encoders: the models that turn text into vectors and scores.

`embedding` is the Embedder interface and sentence-transformers on torch; `onnx` the same
model on ONNX Runtime, exported and checked here; `factory` the embedder the settings choose
between the two; `rerank` the cross-encoders that score passages against a query. Import
from those modules: this package itself imports none of them."""
