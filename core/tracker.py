"""StageTracker: rounds, escalations, the stage and plan clocks (SPEC §4).

Pure bookkeeping with an injected monotonic clock; it decides nothing about
*when* its answers are consulted — the controller's stage loop does that.

Units, stated once because every limit is only as real as the unit it counts:
- a **round** is one completed agent turn inside a stage. Entering a stage
  spends none (`start_stage` registers it at 0); `record_round` is called once
  per completed turn and by nothing else.
- the **plan clock** starts with the first stage and is never re-armed.
- the **stage clock** restarts when a stage is entered or re-armed by guidance,
  so time parked at a Go prompt never counts against a stage.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

MAX_STAGE_ROUNDS = 3
MAX_STAGE_ESCALATIONS = 2
DEFAULT_STAGE_TIMEOUT_SECONDS = 1800.0
DEFAULT_PLAN_DURATION_SECONDS = 7200.0
PLAN_WARN_FRACTION = 0.75


@dataclass(frozen=True, slots=True)
class Budgets:
    stage_timeout_seconds: float = DEFAULT_STAGE_TIMEOUT_SECONDS
    max_plan_duration_seconds: float = DEFAULT_PLAN_DURATION_SECONDS


class StageTracker:
    def __init__(
        self,
        *,
        clock: Callable[[], float],
        stage_timeout_seconds: float | None = None,
        max_plan_duration_seconds: float | None = None,
        max_rounds: int = MAX_STAGE_ROUNDS,
        max_escalations: int = MAX_STAGE_ESCALATIONS,
    ) -> None:
        self._clock = clock
        # A property of this object, not of whoever built it: "no budget was
        # supplied" must stay distinguishable from "a budget equal to the default".
        self.budgets_unset = stage_timeout_seconds is None and max_plan_duration_seconds is None
        self.stage_timeout_seconds = (
            DEFAULT_STAGE_TIMEOUT_SECONDS if stage_timeout_seconds is None else float(stage_timeout_seconds)
        )
        self.max_plan_duration_seconds = (
            DEFAULT_PLAN_DURATION_SECONDS if max_plan_duration_seconds is None else float(max_plan_duration_seconds)
        )
        self.max_rounds = max_rounds
        self.max_escalations = max_escalations
        self.budget_source = "defaults" if self.budgets_unset else "explicit"
        self.load_attempts = 0
        self._rounds: dict[int, int] = {}
        self._escalations: dict[int, int] = {}
        self._plan_started: float | None = None
        self._stage_started: float | None = None
        self._warned = False
        self.current_stage: int | None = None
        self.stopped = False

    # -- budgets ---------------------------------------------------------------
    def load_budgets(self, loader: Callable[[], Budgets]) -> str:
        """Load budgets once if none were supplied; returns where they came from.

        A failed load lands both budgets on the defaults (never on 0, which would
        disable the ceiling) and is recorded as done, so one bad configuration
        read cannot become one per Go.
        """
        if not self.budgets_unset:
            return self.budget_source
        self.load_attempts += 1
        try:
            budgets = loader()
            self.stage_timeout_seconds = float(budgets.stage_timeout_seconds)
            self.max_plan_duration_seconds = float(budgets.max_plan_duration_seconds)
            self.budget_source = "config"
        except Exception:
            self.stage_timeout_seconds = DEFAULT_STAGE_TIMEOUT_SECONDS
            self.max_plan_duration_seconds = DEFAULT_PLAN_DURATION_SECONDS
            self.budget_source = "defaults"
        finally:
            self.mark_budgets_loaded()
        return self.budget_source

    def mark_budgets_loaded(self) -> None:
        self.budgets_unset = False

    # -- stages and rounds -----------------------------------------------------
    def start_stage(self, n: int) -> None:
        """Register stage n (at 0 rounds the first time) and restart its clock.

        Re-entering a stage keeps its rounds and escalations: re-entry must not
        launder a cap.
        """
        self._rounds.setdefault(n, 0)
        self._escalations.setdefault(n, 0)
        self.current_stage = n
        now = self._clock()
        if self._plan_started is None:
            self._plan_started = now
        self._stage_started = now

    def record_round(self, n: int) -> bool:
        """Count one completed turn of stage n; True when the stage is at its cap."""
        self._rounds[n] = self._rounds.get(n, 0) + 1
        return self.round_limit_reached(n)

    def rounds(self, n: int) -> int:
        return self._rounds.get(n, 0)

    def escalations(self, n: int) -> int:
        return self._escalations.get(n, 0)

    def round_limit_reached(self, n: int) -> bool:
        return self._rounds.get(n, 0) >= self.max_rounds

    def reset_after_guidance(self, n: int) -> bool:
        """Guidance to a stage at its cap re-arms it (rounds → 0, escalations + 1).

        Returns True when it re-armed. The stage clock restarts either way: the
        operator's turn is not charged with the time the plan sat halted.
        """
        self._stage_started = self._clock()
        self.current_stage = n
        if not self.round_limit_reached(n):
            return False
        self._rounds[n] = 0
        self._escalations[n] = self._escalations.get(n, 0) + 1
        return True

    def is_force_failed(self, n: int) -> bool:
        """At the cap again after the last allowed escalation: nothing retries it."""
        return self.round_limit_reached(n) and self._escalations.get(n, 0) >= self.max_escalations

    # -- clocks ----------------------------------------------------------------
    @property
    def plan_started(self) -> bool:
        return self._plan_started is not None

    def plan_elapsed(self) -> float:
        return 0.0 if self._plan_started is None else self._clock() - self._plan_started

    def plan_timed_out(self) -> bool:
        budget = self.max_plan_duration_seconds
        return budget > 0 and self._plan_started is not None and self.plan_elapsed() > budget

    def plan_warning_due(self) -> bool:
        """True exactly once per plan, the first time it is asked at/after 75 %."""
        budget = self.max_plan_duration_seconds
        if self._warned or budget <= 0 or self._plan_started is None:
            return False
        if self.plan_elapsed() >= PLAN_WARN_FRACTION * budget:
            self._warned = True
            return True
        return False

    @property
    def warned(self) -> bool:
        return self._warned

    def stage_elapsed(self) -> float:
        return 0.0 if self._stage_started is None else self._clock() - self._stage_started

    def stage_remaining(self) -> float | None:
        """Seconds left of the running stage's timeout; None when disabled."""
        if self.stage_timeout_seconds <= 0:
            return None
        return max(0.0, self.stage_timeout_seconds - self.stage_elapsed())

    def stop(self) -> None:
        self.stopped = True
