"""Helpers shared by the command modules (not a command: the leading underscore hides it)."""


def printable(text: str) -> str:
    """`text` with control characters escaped, so names from files cannot drive the terminal."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


def one_line(text: str) -> str:
    """A message's first line, printable; " ..." marks that more followed."""
    first, _, rest = text.partition("\n")
    return printable(first) + (" ..." if rest.strip() else "")
