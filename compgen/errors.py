"""User-facing errors: the CLI prints them as one line and exits with status 2."""

import contextlib
import os
import re
import stat


class UserError(Exception):
    """A mistake in the user's input (file, option, data); never a bug in compgen.

    The message is printed as ``error: <message>``; name the file, line or option.
    """


class SettingError(UserError, ValueError):
    """A setting out of range, unknown, or at odds with another. The message names each
    setting in backquotes (`temperature`): the library's text says the setting
    (``temperature``), the command line's the flag that sets it (``--temperature``), and a
    preset file's reader (a ValueError) the key under the file's name."""

    def __init__(self, template: str):
        self.template = template
        super().__init__(self.text(lambda name: name))

    def text(self, name_of) -> str:
        """The message with every `setting` written as ``name_of(setting)``."""
        return name_settings(self.template, name_of)


_SETTING = re.compile(r"`([a-z][a-z0-9_]*)`")


def name_settings(template: str, name_of) -> str:
    """``template`` (a message, or a log line, naming settings in backquotes) with every
    `setting` written as ``name_of(setting)``."""
    return _SETTING.sub(lambda match: name_of(match.group(1)), template)


class Interrupted(UserError):
    """Work cut short from outside, not by its input (a child process killed by a
    signal): what it kept for a rerun (a sampling journal) stays."""


class Terminated(BaseException):
    """SIGTERM arrived: raised in the main thread so that every ``finally`` runs (staging
    folders removed, child processes killed) before the process exits with 128 + 15."""


def where(path, line: int | None = None) -> str:
    """Format a ``FILE:LINE`` location for error messages."""
    return f"{path}:{line}" if line is not None else str(path)


def decode_text(data: bytes, source) -> str:
    """``data`` as UTF-8 text (a byte-order mark dropped); binary or mis-encoded input is a
    UserError naming the line."""
    if b"\x00" in data:
        line = data[:data.index(b"\x00")].count(b"\n") + 1
        raise UserError(f"{where(source, line)}: binary data (a NUL byte), expected UTF-8 text")
    try:
        return data.decode("utf-8").removeprefix("\ufeff")
    except UnicodeDecodeError as exc:
        line = data[:exc.start].count(b"\n") + 1
        raise UserError(f"{where(source, line)}: not UTF-8 text (byte 0x{data[exc.start]:02x} "
                        f"at offset {exc.start})") from None


def not_a_file(path, noun: str = "file") -> str:
    """Why ``path``, which is no regular file, cannot be read as one: missing, a folder, or
    a device, FIFO or socket (/dev/zero is there: "no such file" misled)."""
    if os.path.isdir(path):
        return f"is a folder, expected a {noun}"
    if os.path.lexists(path) and os.path.exists(path):
        return "not a regular file (a FIFO, socket or device)"
    return f"no such {noun}"


def read_text(path) -> str:
    """The UTF-8 text of a file; a folder, unreadable file or binary content is a UserError,
    and so is a device (/dev/zero never ends)."""
    with contextlib.suppress(OSError):
        if stat.S_ISCHR(os.stat(path).st_mode) or stat.S_ISBLK(os.stat(path).st_mode):
            raise UserError(f"{path}: a device, not a file")
    try:
        with open(path, "rb") as handle:
            data = handle.read()
    except IsADirectoryError:
        raise UserError(f"{path}: is a folder, expected a file") from None
    except FileNotFoundError:
        raise UserError(f"{path}: no such file") from None
    except PermissionError:
        raise UserError(f"{path}: permission denied") from None
    except OSError as exc:   # a link to itself, an I/O error: the file cannot be read
        raise UserError(f"{path}: cannot read ({exc.strerror or type(exc).__name__})") from None
    return decode_text(data, path)


SEED_MIN, SEED_MAX = -(1 << 63), (1 << 63) - 1


def check_seed(seed: int, setting: str = "seed") -> int:
    """``seed`` if it is a signed 64-bit integer, else a SettingError (no silent wrapping)."""
    if isinstance(seed, bool) or not isinstance(seed, int) or not SEED_MIN <= seed <= SEED_MAX:
        raise SettingError(f"`{setting}` {seed}: must be an integer from -2^63 to 2^63-1 "
                           "(a signed 64-bit seed)")
    return seed
