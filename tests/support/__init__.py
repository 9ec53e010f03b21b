"""Test helpers shared across test packages."""
