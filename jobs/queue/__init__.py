"""The queue: jobs waiting for a deployment's engine and who goes next (queueing), and the Redis door for a
job's events — tokens, ends, cancels, new work (stream) and listening to them from a request (listen)."""
