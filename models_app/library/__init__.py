"""The model library: adding GGUF files (adding, uploads), the bundled model (bundled), renaming and removing
models and deployments (removal)."""
