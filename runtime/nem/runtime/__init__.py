"""The NEM reference runtime: interprets NEM IR directly (functional, random and
timed schedules; race/deadlock detection; traces; Python API)."""

from nem.runtime.api import NemInterpreter
from nem.runtime.checks import Deadlock, DeadlockError, Race, Unconsumed
from nem.runtime.memory import Memory, RegionInst
from nem.runtime.session import Program, RunResult, Session, StepResult

__all__ = [
    "NemInterpreter",
    "Program",
    "RunResult",
    "Session",
    "StepResult",
    "Deadlock",
    "DeadlockError",
    "Race",
    "Unconsumed",
    "Memory",
    "RegionInst",
]
