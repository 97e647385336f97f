"""Names the reference lister prints for ARMv7-A/R exceptions and I-sync reasons.

Shared by the PTM and ETMv3 packet texts (both trace v7-A/R cores): the exception
numbers of a branch-address packet's exception byte, and the reasons of an I-sync.
"""

from __future__ import annotations

__all__ = ["EXCEPTION_NAMES", "ISYNC_REASONS"]

EXCEPTION_NAMES = (
    "No Exception",
    "Debug Halt",
    "SMC",
    "Hyp",
    "Async Data Abort",
    "Jazelle",
    "Reserved",
    "Reserved",
    "PE Reset",
    "Undefined Instr",
    "SVC",
    "Prefetch Abort",
    "Data Fault",
    "Generic",
    "IRQ",
    "FIQ",
)

ISYNC_REASONS = ("Periodic", "Trace Enable", "Restart Overflow", "Debug Exit")
