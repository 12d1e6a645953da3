"""Functions the fixture chapter and check file exercise."""


def double(x: int) -> int:
    """Twice ``x``."""
    return 2 * x


def describe(x: int) -> str:
    """A label no check looks at."""
    return f"value {x}"
