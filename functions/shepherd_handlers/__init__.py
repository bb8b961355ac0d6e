"""Shepherd."""
