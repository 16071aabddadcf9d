"""The chat page and conversations, in a real browser and through the API."""
