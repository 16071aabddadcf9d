"""The APIs for scripts: the panel's REST API for jobs, batches and usage (views, batches, usage, inputs; router.py
mounts them) and the OpenAI-compatible one under /v1/ (openai_*)."""
