"""Reading GGUF files: their tensors (reader), their metadata and shape (meta), quantization in words."""
