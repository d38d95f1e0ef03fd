def greet(name: str) -> str:
    """A greeting for `name`."""
    return f"Hello, {name}!"
