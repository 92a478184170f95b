"""A class's join code: six characters of Crockford's Base32 (no I, L, O or U), easy to
read from a projector and to type on a phone. Typing is forgiving: lower case, spaces
and dashes are ignored, O is read as 0, I and L as 1."""

from __future__ import annotations

import secrets

ALPHABET = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"  # Crockford's Base32: 32 symbols, no I L O U
LENGTH = 6  # 32⁶ ≈ 1.07 × 10⁹ codes
_LOOKALIKES = str.maketrans({"O": "0", "I": "1", "L": "1"})


def new_code() -> str:
    """A random join code (the store makes sure no live class has it)."""
    return "".join(secrets.choice(ALPHABET) for _ in range(LENGTH))


def normalize(typed) -> str | None:
    """The code a student meant, or None when it cannot be one: upper case, without
    spaces or dashes, look-alike letters read as the digits they resemble."""
    if not isinstance(typed, str) or len(typed) > 4 * LENGTH:
        return None
    code = "".join(c for c in typed.upper() if c not in " -_\t\n").translate(_LOOKALIKES)
    return code if len(code) == LENGTH and all(c in ALPHABET for c in code) else None


def spaced(code: str) -> str:
    """The code as a projector shows it: two groups of three (``7KQ 2M9``)."""
    return f"{code[:3]} {code[3:]}"
