"""Who may see which vendor, and do what, in a team's dashboard: the access file
(`EVIDENCE_ACCESS_FILE`, TOML) maps the identity provider's groups to a role and vendors.

    [groups.acme-reviewers]
    role = "reviewer"        # viewer: read; reviewer: + decide, judge, ask, assess;
    vendors = ["acme"]       # admin: + ingest, audit. ["*"] is every vendor.

A user's rights are the union over their groups, vendor by vendor: the highest role any of
their groups gives on it. A user of no listed group sees no vendor. The file is read whole
and checked before anyone is let in: a wrong entry refuses the dashboard in one sentence
rather than granting less, or more, than it says."""

from __future__ import annotations

import tomllib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from core.errors import UserInputError

ROLES = ("viewer", "reviewer", "admin")  # each may do what the ones before it may
EVERY_VENDOR = "*"
# What each action needs, at least.
NEEDS = {"read": "viewer", "search": "viewer", "export": "viewer",
         "decide": "reviewer", "judge": "reviewer", "ask": "reviewer", "assess": "reviewer",
         "ingest": "admin", "audit": "admin"}


def _rank(role: str | None) -> int:
    return ROLES.index(role) + 1 if role in ROLES else 0


@dataclass(frozen=True)
class Grant:
    """What one group gives: a role on some vendors (None: every vendor)."""

    role: str
    vendors: frozenset[str] | None


@dataclass(frozen=True)
class Rights:
    """One user's rights: the role on each vendor (under EVERY_VENDOR, the role on all)."""

    roles: Mapping[str, str]
    groups: tuple[str, ...]  # the user's groups the access file names

    def role_on(self, vendor_id: str) -> str | None:
        """The highest role the user has on the vendor; None when they may not see it."""
        found = [self.roles.get(vendor_id), self.roles.get(EVERY_VENDOR)]
        return max(found, key=_rank) if any(found) else None

    def sees(self, vendor_id: str) -> bool:
        return self.role_on(vendor_id) is not None

    def may(self, action: str, vendor_id: str | None = None) -> bool:
        """Whether the user may do `action` on the vendor (with no vendor, on any one)."""
        role = (self.role_on(vendor_id) if vendor_id is not None
                else max(self.roles.values(), key=_rank, default=None))
        return _rank(role) >= _rank(NEEDS[action])

    def visible(self, vendor_ids: Iterable[str]) -> list[str]:
        """The vendors of `vendor_ids` the user may see, in their order."""
        return [v for v in vendor_ids if self.sees(v)]

    @property
    def top_role(self) -> str | None:
        """The highest role the user has anywhere (shown beside their name)."""
        return max(self.roles.values(), key=_rank, default=None)

    def described(self) -> str:
        """'acme (reviewer), northwind (viewer)' or 'every vendor (admin)', or 'no vendor'."""
        if not self.roles:
            return "no vendor"
        return ", ".join(("every vendor" if v == EVERY_VENDOR else v) + f" ({r})"
                         for v, r in sorted(self.roles.items()))


@dataclass(frozen=True)
class AccessPolicy:
    """The access file as read: group -> what it gives."""

    grants: Mapping[str, Grant]
    source: str

    @classmethod
    def load(cls, path: Path) -> AccessPolicy:
        """The access file, or one sentence naming what is wrong with it."""
        shown = str(path)
        try:
            data = tomllib.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise UserInputError(f"The access file {shown} (EVIDENCE_ACCESS_FILE) does not "
                                 "exist.") from None
        except (OSError, UnicodeDecodeError) as exc:
            raise UserInputError(f"The access file {shown} cannot be read ({exc}).") from None
        except tomllib.TOMLDecodeError as exc:
            raise UserInputError(f"The access file {shown} is not valid TOML ({exc}).") from None
        return cls.from_mapping(data, shown)

    @classmethod
    def from_mapping(cls, data: Mapping[str, object], source: str) -> AccessPolicy:
        unknown = sorted(set(data) - {"groups"})
        if unknown:
            raise UserInputError(f"The access file {source} has a table [{unknown[0]}]; it "
                                 "holds only [groups.NAME] tables.")
        groups = data.get("groups", {})
        if not isinstance(groups, Mapping):
            raise UserInputError(f"The access file {source}: groups must be tables "
                                 "[groups.NAME] with a role and vendors.")
        grants: dict[str, Grant] = {}
        for name, entry in groups.items():
            where = f"The access file {source}, [groups.{name}]"
            if not isinstance(entry, Mapping):
                raise UserInputError(f"{where} must be a table with a role and vendors.")
            extra = sorted(set(entry) - {"role", "vendors"})
            if extra:
                raise UserInputError(f"{where} has the key {extra[0]}; a group has a role and "
                                     "vendors only.")
            role = entry.get("role")
            if role not in ROLES:
                raise UserInputError(f"{where}: the role must be one of {', '.join(ROLES)}, "
                                     f"not {role!r}.")
            vendors = entry.get("vendors")
            if (not isinstance(vendors, list) or not vendors
                    or not all(isinstance(v, str) and v.strip() for v in vendors)):
                raise UserInputError(f"{where}: vendors must be a list of vendor ids, or "
                                     "[\"*\"] for every vendor.")
            grants[name] = Grant(str(role), None if EVERY_VENDOR in vendors
                                 else frozenset(v.strip() for v in vendors))
        return cls(grants, source)

    def rights(self, user_groups: Sequence[str]) -> Rights:
        """The union of what the user's groups give, vendor by vendor."""
        roles: dict[str, str] = {}
        matched: list[str] = []
        for group in user_groups:
            grant = self.grants.get(group)
            if grant is None:
                continue
            matched.append(group)
            for vendor in grant.vendors if grant.vendors is not None else [EVERY_VENDOR]:
                if _rank(grant.role) > _rank(roles.get(vendor)):
                    roles[vendor] = grant.role
        return Rights(roles, tuple(matched))


def groups_of(claims: Mapping[str, object], claim: str) -> list[str]:
    """The user's groups from their ID token's claim: a list of names, or one name (some
    providers send a single group as a string). Anything else is no group."""
    value = claims.get(claim)
    if isinstance(value, str):
        return [value]
    if isinstance(value, list):
        return [str(v) for v in value if isinstance(v, str | int)]
    return []
