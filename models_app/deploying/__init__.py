"""Deploying a plan: pushing tensors to the laptops' caches (preseed, tensor_cache), starting its servers and
engine (deploy), what a deployment holds and does (holding, cache_use, activity), and the hooks by which the jobs
app above answers what deployments ask of their jobs (jobs_above)."""
