"""Hostile cases: every feature is held to them (issue 12)."""
