"""The answer every operator action gets: accepted, queued or refused (SPEC §2.7)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Protocol

VerdictKind = Literal["accepted", "queued", "refused"]


@dataclass(frozen=True, slots=True)
class Verdict:
    kind: VerdictKind
    text: str

    @property
    def ok(self) -> bool:
        return self.kind != "refused"


class ControllerPort(Protocol):
    """The one small surface a UI (or a shell) drives a plan through."""

    def go(self) -> Verdict: ...

    def go_all(self) -> Verdict: ...

    def cancel(self) -> Verdict: ...

    def guidance(self, text: str) -> Verdict: ...

    def permission(self, request_id: str, decision: str) -> Verdict: ...
