"""Groups of trackings as the store keeps them: one row of counters per group.

A group is named by the caller (global, across workspaces). The store never
holds a list of members: each member row carries its group's name, and the
group's row counts members, ended members and ends by outcome, so a group of
100,000 members is one row and an index. Whether a sealed group has ended is
decided by the store in the transaction that writes its last member's terminal
state (or the seal, or the deadline), which is also where its one event is
appended: exactly one group event, across crashes and replicas.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from orchestrator.vocabulary import Outcome

GroupState = Literal["open", "sealed", "completed", "deadline_exceeded"]
GROUP_STATES: tuple[GroupState, ...] = ("open", "sealed", "completed", "deadline_exceeded")
OUTCOMES: tuple[str, ...] = tuple(o.value for o in Outcome)
# The members a group event lists by name (not succeeded, or still open): the rest are
# counted; an event stays a few hundred kilobytes even for 100,000 members.
LISTED_MEMBERS = 100


@dataclass(slots=True)
class Group:
    name: str
    created_at: float
    expect: int | None
    sealed_at: float | None
    deadline_at: float | None
    members: int
    ended: int
    outcomes: dict[str, int]
    first_end_at: float | None
    last_end_at: float | None
    outcome: str | None  # completed | deadline_exceeded once its event is written
    ended_at: float | None
    traceparent: str | None = None  # the sealing call's trace context
    tracestate: str | None = None

    @property
    def state(self) -> GroupState:
        if self.outcome == "completed":
            return "completed"
        if self.outcome == "deadline_exceeded":
            return "deadline_exceeded"
        return "sealed" if self.sealed_at is not None else "open"


@dataclass(slots=True)
class Member:
    """A member named in a group event: one that did not succeed, or one still open."""

    tracking_id: str
    workspace: str
    kind: str
    remote_id: str
    outcome: str | None
    remote_status: str | None
    result: dict[str, Any] | None


@dataclass(slots=True)
class GroupEnd:
    """What a group event says: the group as it ended and the members it names."""

    group: Group
    listed: list[Member] = field(default_factory=list)


# Builds a group's one event (a NewEvent) from how it ended; given by the caller of
# the store, which appends what it returns in the deciding transaction.
GroupEventFactory = Callable[[GroupEnd], Any]


@dataclass(slots=True)
class SealGroup:
    """A seal: no more members after it (an open group's deadline may come with it)."""

    name: str
    at: float
    event: GroupEventFactory
    deadline_at: float | None = None
    traceparent: str | None = None
    tracestate: str | None = None


GROUP_COLUMNS = (
    "name, created_at, expect, sealed_at, deadline_at, members, ended, "
    + ", ".join(OUTCOMES)
    + ", first_end_at, last_end_at, outcome, ended_at, traceparent, tracestate"
)


def group_row(row: Any) -> Group:
    """A row of ``GROUP_COLUMNS``."""
    v = list(row)
    counts = dict(zip(OUTCOMES, v[7 : 7 + len(OUTCOMES)], strict=True))
    rest = v[7 + len(OUTCOMES) :]
    return Group(
        name=v[0],
        created_at=v[1],
        expect=v[2],
        sealed_at=v[3],
        deadline_at=v[4],
        members=v[5],
        ended=v[6],
        outcomes={k: int(n) for k, n in counts.items()},
        first_end_at=rest[0],
        last_end_at=rest[1],
        outcome=rest[2],
        ended_at=rest[3],
        traceparent=rest[4],
        tracestate=rest[5],
    )


class GroupStore(Protocol):
    """The store's group operations (a part of ``Store``)."""

    async def seal_group(self, seal: SealGroup) -> Group | None:
        """Seal the group (idempotent: the first seal's time and trace stand) and, if
        every member has ended, end it with its event in the same transaction. None
        when there is no such group."""

    async def expire_groups(self, now: float, event: GroupEventFactory) -> list[Group]:
        """End every group whose deadline has passed before its members all ended, each
        with its ``deadline_exceeded`` event."""

    async def get_group(self, name: str) -> Group | None: ...

    async def list_groups(
        self, state: GroupState | None, limit: int, cursor: str | None
    ) -> tuple[list[Group], str | None]:
        """By name; ValueError for a bad cursor."""

    async def count_open_groups(self) -> int:
        """Groups not ended yet (open or sealed)."""

    async def next_group_deadline(self) -> float | None:
        """The soonest deadline of a group still waiting for its event."""
