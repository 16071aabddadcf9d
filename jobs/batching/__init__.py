"""Batches as a service: reading batch files, queueing them, their counts, results and files (the Batches page,
/api/batches/ and /v1/batches all call this)."""
