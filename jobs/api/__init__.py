"""The APIs for scripts: the panel's REST API (views, rest, inputs) and the OpenAI-compatible one
(openai_api, openai_views)."""
