"""User-facing errors: the CLI prints them as one line and exits with status 2."""


class UserError(Exception):
    """A mistake in the user's input (file, option, data); never a bug in compgen.

    The message is printed as ``error: <message>``; name the file, line or option.
    """


def where(path, line: int | None = None) -> str:
    """Format a ``FILE:LINE`` location for error messages."""
    return f"{path}:{line}" if line is not None else str(path)
