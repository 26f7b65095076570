"""Who may log in to the console, and with which role.

Two sources:
- an accounts file: one account a line, `NAME ROLE HASH` (blank lines and `#` comments allowed),
  ROLE `admin` or `read-only`, HASH a salted scrypt hash as Werkzeug writes it
  (`scrypt:N:r:p$salt$hex`). It must be private to its owner (mode 600), like the brokers'
  secret file. `rocketstore console-account` adds or changes an account (`set_account`), writing
  the file whole to a temporary file first and renaming it over the old one;
- no file: one account, `admin`, whose password is the brokers' admin secret.

`verify` hashes even for an unknown name, so the time it takes does not say which names exist.
Passwords and hashes never reach a log or a page. Thread-safety: `Accounts` is immutable.
"""

from __future__ import annotations

import enum
import hmac
import os
import re
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from werkzeug.security import check_password_hash, generate_password_hash

from wire.auth import check_private_file

SECRET_ACCOUNT = "admin"
MIN_PASSWORD_CHARS = 12
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._@-]{0,63}")
# Compared against when the name is unknown: the same work as a real check.
_DUMMY_HASH = generate_password_hash("not a password of anyone")


class Role(enum.Enum):
    READ_ONLY = "read-only"
    ADMIN = "admin"

    @classmethod
    def parse(cls, text: str) -> Role:
        try:
            return cls(text)
        except ValueError:
            raise ValueError(f"a role is {' or '.join(r.value for r in cls)}, not {text!r}") from None


@dataclass(frozen=True, slots=True)
class Account:
    name: str
    role: Role


class AccountsError(ValueError):
    """An accounts file that cannot be used: says which file and line, and what is wrong."""


def check_name(name: str) -> str:
    if not _NAME.fullmatch(name):
        raise ValueError(f"an account name is 1 to 64 letters, digits, '.', '_', '@' or '-', not {name!r}")
    return name


class Accounts:
    """The accounts that may log in. `from_file` or `from_secret`."""

    def __init__(self, hashes: Mapping[str, tuple[Role, str]], *, secret: bytes | None = None) -> None:
        self._hashes = dict(hashes)
        self._secret = secret

    @classmethod
    def from_secret(cls, secret: bytes) -> Accounts:
        if not secret:
            raise ValueError("the admin secret is empty")
        return cls({}, secret=bytes(secret))

    @classmethod
    def from_file(cls, path: Path) -> Accounts:
        return cls(_read(path))

    @property
    def uses_secret(self) -> bool:
        return self._secret is not None

    def __len__(self) -> int:
        return 1 if self._secret is not None else len(self._hashes)

    def role_of(self, name: str) -> Role | None:
        """The role of an existing account (a session's account may have been removed)."""
        if self._secret is not None:
            return Role.ADMIN if name == SECRET_ACCOUNT else None
        entry = self._hashes.get(name)
        return entry[0] if entry is not None else None

    def verify(self, name: str, password: str) -> Account | None:
        if self._secret is not None:
            matches = hmac.compare_digest(password.encode("utf-8"), self._secret)
            return Account(SECRET_ACCOUNT, Role.ADMIN) if matches and name == SECRET_ACCOUNT else None
        entry = self._hashes.get(name)
        if entry is None:
            check_password_hash(_DUMMY_HASH, password)
            return None
        role, hashed = entry
        return Account(name, role) if check_password_hash(hashed, password) else None

    def __repr__(self) -> str:
        source = "the admin secret" if self._secret is not None else f"{len(self._hashes)} account(s)"
        return f"Accounts({source})"


def _read(path: Path) -> dict[str, tuple[Role, str]]:
    try:
        check_private_file(path, "the accounts file")
        text = path.read_text(encoding="utf-8")
    except (OSError, ValueError) as exc:
        raise AccountsError(str(exc)) from None
    accounts: dict[str, tuple[Role, str]] = {}
    for number, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        words = line.split()
        where = f"{path} line {number}"
        if len(words) != 3:
            raise AccountsError(f"{where}: expected NAME ROLE HASH, got {len(words)} word(s)")
        name, role, hashed = words
        try:
            check_name(name)
            parsed = Role.parse(role)
        except ValueError as exc:
            raise AccountsError(f"{where}: {exc}") from None
        if not hashed.startswith(("scrypt:", "pbkdf2:")) or hashed.count("$") != 2:
            raise AccountsError(f"{where}: the password hash is not one `rocketstore console-account` writes")
        if name in accounts:
            raise AccountsError(f"{where}: account {name} appears twice")
        accounts[name] = (parsed, hashed)
    if not accounts:
        raise AccountsError(f"{path} has no account: add one with `rocketstore console-account`")
    return accounts


def set_account(path: Path, name: str, role: Role, password: str) -> bool:
    """Add the account, or change its role and password; True when it was new. The file is
    written whole (mode 600) and renamed over the old one, so a crash leaves one or the other."""
    check_name(name)
    if len(password) < MIN_PASSWORD_CHARS:
        raise ValueError(f"a password needs at least {MIN_PASSWORD_CHARS} characters")
    accounts = _read(path) if path.exists() else {}
    new = name not in accounts
    accounts[name] = (role, generate_password_hash(password))
    lines = ["# rocketstore console accounts: NAME ROLE HASH (rocketstore console-account writes them)"]
    lines += [f"{n} {r.value} {h}" for n, (r, h) in sorted(accounts.items())]
    directory = path.parent if str(path.parent) else Path(".")
    fd, temporary = tempfile.mkstemp(dir=directory, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write("\n".join(lines) + "\n")
            out.flush()
            os.fsync(out.fileno())
        os.chmod(temporary, 0o600)
        os.replace(temporary, path)
    except BaseException:
        os.unlink(temporary)
        raise
    return new
