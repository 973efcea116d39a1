"""Owner binding shared by every network surface: per-user keys and the bound identity.

With per-user keys configured the credential binds the owner: a request naming another
``user_id`` is refused and a missing or wrong key is refused. Without keys every request names
its owner (and servers listen on loopback only).
"""

from __future__ import annotations

import hmac

from pydantic import SecretStr

from prme.errors import InvalidInputError, OwnerMismatchError
from prme.validation import require_owner

OWNER_REQUIRED = "user_id is required without a bound identity"


class KeyRing:
    """The configured user keys; ``match`` compares in constant time against every key."""

    def __init__(self, user_keys: dict[str, SecretStr], field: str = "api.user_keys") -> None:
        keys: list[tuple[str, bytes]] = []
        for user_id, key in sorted(user_keys.items()):
            require_owner(user_id, field)
            secret = key.get_secret_value().encode("utf-8")
            if not secret.strip():
                raise InvalidInputError(field, f"the key of {user_id!r} is empty")
            keys.append((user_id, secret))
        if len({secret for _, secret in keys}) != len(keys):
            raise InvalidInputError(field, "every user needs a distinct key")
        self._keys = tuple(keys)

    @property
    def enabled(self) -> bool:
        return bool(self._keys)

    def match(self, token: str | None) -> str | None:
        """The user whose key equals ``token``; every key is compared, whatever matches."""
        offered = (token or "").encode("utf-8")
        matched: str | None = None
        for user_id, secret in self._keys:
            if hmac.compare_digest(offered, secret):
                matched = user_id
        return matched

    def __repr__(self) -> str:
        return f"KeyRing(users={[user for user, _ in self._keys]!r})"


class Identity:
    """Who a request acts for: the owner bound by its credential, or None (no keys configured)."""

    def __init__(self, bound: str | None) -> None:
        self.bound = bound

    def owner(self, requested: str | None) -> str:
        """The owner of this request; 403 for another user's id, 422 when nobody is named."""
        if self.bound is not None:
            if requested is not None and requested != self.bound:
                raise OwnerMismatchError(self.bound, requested)
            return self.bound
        if requested is None:
            raise InvalidInputError("user_id", OWNER_REQUIRED)
        return requested
