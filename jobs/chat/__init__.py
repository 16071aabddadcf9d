"""The chat page: conversations, their turns as jobs, and the socket that streams an answer."""
