"""Domains: one package per domain (see docs/domains.md)."""
