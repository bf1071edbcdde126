"""Helpers shared by the command modules (not a command: the leading underscore hides it)."""


def printable(text: str) -> str:
    """`text` with control characters escaped, so names from files cannot drive the terminal."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


def one_line(text: str) -> str:
    """A message's first line, printable; " ..." marks that more followed."""
    first, _, rest = text.partition("\n")
    return printable(first) + (" ..." if rest.strip() else "")


class DeviceChoices:
    """argparse `choices` for a cost-model device: the C++ device table's names (one source).

    Read on first use, not when the parser is built: every command's parser is built on
    each call, and `solve` must not load torch (the table lives in the torch extension _C).
    Names match without case, as the C++ lookup does, and the name given is kept as typed.
    """

    def __init__(self):
        self._names = None

    def _load(self):
        if self._names is None:
            from .. import _C  # noqa: PLC0415

            self._names = list(_C.device_names())
        return self._names

    def __iter__(self):
        return iter(self._load())

    def __contains__(self, name) -> bool:
        return isinstance(name, str) and name.lower() in (n.lower() for n in self._load())
