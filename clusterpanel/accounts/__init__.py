"""Accounts: users and roles, API tokens, per-user and per-token limits, their pages and API. Its models are
the clusterpanel app's (clusterpanel/models.py registers them). Imports the toolkit only."""
