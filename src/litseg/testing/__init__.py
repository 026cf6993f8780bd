"""Helpers for tests: tiny local models built on the fly (no download)."""
