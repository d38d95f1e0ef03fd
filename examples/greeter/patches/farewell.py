def farewell(name: str) -> str:
    """A goodbye for `name`."""
    return f"Goodbye, {name}."
