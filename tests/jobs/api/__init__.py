"""The REST and OpenAI-compatible APIs: their validation, errors, limits and answers on a real panel."""
