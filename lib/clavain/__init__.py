"""Clavain: cheap, checkpointed, verifiable agent work for Claude Code.

Kept import-free on purpose: hooks import this package on every tool call.
"""

__version__ = "0.1.0"
