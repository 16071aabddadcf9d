"""Faults: a laptop, an rpc-server, Redis or a worker lost under running jobs, and what recovery does."""
