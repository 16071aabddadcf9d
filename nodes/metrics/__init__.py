"""Live CPU, memory and network of every laptop: the sampler's script on the laptop (sampler), the collector that
reads its stream (collector), and where samples live (store: Redis for the last hour, the database per minute)."""
