"""Who goes next and how a job's events reach its listener: queue order and positions, streams, messages."""
