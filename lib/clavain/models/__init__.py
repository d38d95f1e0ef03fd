"""Pydantic models for everything that crosses a boundary, one module per concept.

Never imported on the hook hot path (pydantic costs ~200 ms to import).
"""
