"""ONNX Runtime settings on the shipped ∇E graphs (issue 51, item 4): bench.sh runs engines' BenchmarkGradCallSettings, table prints it."""
