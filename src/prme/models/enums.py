"""Enumerations with the exact values of the reference (note ``organisation``)."""

from __future__ import annotations

from enum import StrEnum
from typing import TypeVar


class Scope(StrEnum):
    PERSONAL = "personal"
    PROJECT = "project"
    ORGANISATION = "organisation"
    AGENT = "agent"
    SYSTEM = "system"
    SANDBOX = "sandbox"


class NodeType(StrEnum):
    ENTITY = "entity"
    EVENT = "event"
    FACT = "fact"
    DECISION = "decision"
    PREFERENCE = "preference"
    TASK = "task"
    SUMMARY = "summary"
    NOTE = "note"
    INSTRUCTION = "instruction"


class EpistemicType(StrEnum):
    OBSERVED = "observed"
    ASSERTED = "asserted"
    INFERRED = "inferred"
    HYPOTHETICAL = "hypothetical"
    CONDITIONAL = "conditional"
    DEPRECATED = "deprecated"
    UNVERIFIED = "unverified"


class LifecycleState(StrEnum):
    TENTATIVE = "tentative"
    STABLE = "stable"
    CONTESTED = "contested"
    SUPERSEDED = "superseded"
    DEPRECATED = "deprecated"
    ARCHIVED = "archived"


class SourceType(StrEnum):
    USER_STATED = "user_stated"
    USER_DEMONSTRATED = "user_demonstrated"
    SYSTEM_INFERRED = "system_inferred"
    EXTERNAL_DOCUMENT = "external_document"
    TOOL_OUTPUT = "tool_output"


class DecayProfile(StrEnum):
    PERMANENT = "permanent"
    SLOW = "slow"
    MEDIUM = "medium"
    FAST = "fast"
    RAPID = "rapid"


DECAY_LAMBDA: dict[DecayProfile, float] = {
    DecayProfile.PERMANENT: 0.0,
    DecayProfile.SLOW: 0.005,
    DecayProfile.MEDIUM: 0.02,
    DecayProfile.FAST: 0.07,
    DecayProfile.RAPID: 0.2,
}


class RetrievalMode(StrEnum):
    DEFAULT = "default"
    EXPLICIT = "explicit"


E = TypeVar("E", bound=StrEnum)


def members_by_value(enum: type[E]) -> dict[str, E]:
    """``enum``'s members by value: a dictionary look-up where calling the enum would cost
    ten times as much (parsing input, reading stored rows)."""
    return {member.value: member for member in enum}
