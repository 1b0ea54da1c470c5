"""ONNX Runtime for a sentence-transformers model: exported here from the installed weights,
cached, and checked against the torch vectors before it embeds anything.

The export is made once per model, library versions and export format, into a folder of
its own under `onnx_cache_dir`: `model.onnx` and `check.json`, the record of the check (the
smallest cosine to the torch vectors over CHECK_TEXTS, the texts, the versions). The folder
appears whole or not at all (built under a temporary name, then renamed), so two processes
exporting at once never read half a file. A later start reads the record and does not import
torch; it encodes a few of the check texts and compares them with the torch vectors the
record keeps, so a damaged file is found and exported again. A model whose check failed is
not used: the caller embeds with torch and says why.

The modules, each importing only those above it: `layout` (the model folder), `check` (the
check's texts, threshold and record), `cache` (the export's folder), `runtime` (tokenizer,
session, encoder), `export` (export and check), `report` (what runs, without loading),
`embedder` (OnnxEmbedder)."""
