"""Batches: files of requests checked, queued, followed on their pages and sockets, and their results."""
