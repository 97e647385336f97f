"""Analyses of a decode: what can be said about a trace beyond its elements.

Input: the runs of a :class:`~cstrace.decode.Session` or decoded elements;
output: typed results (dataclasses). Nothing here prints: text is made by
:mod:`cstrace.render`.

- :mod:`cstrace.analyses.loss`: what the trace lost, per trace ID (bytes,
  packets and elements, synchronisation points, overflows, bad packets,
  resynchronisations, timestamps, code addresses no image covered).
- :mod:`cstrace.analyses.profile`: execution profiles (instruction ranges and
  taken branches with counts, per program binary) and synthesised branch-stack
  samples, for AutoFDO, llvm-profgen, BOLT and tools that read perf's text
  (written by :mod:`cstrace.render.profiles`).
- :mod:`cstrace.analyses.symbols`: function names and DWARF source lines of
  addresses, from ELF images.
- :mod:`cstrace.analyses.instructions`: the instructions executed, walked
  from the decoded instruction ranges, and their text (capstone).
- :mod:`cstrace.analyses.coverage`: instruction, line, function and branch
  coverage (written by :mod:`cstrace.render.coverage`).
- :mod:`cstrace.analyses.calls`: call stacks followed through calls,
  returns, exceptions and trace gaps; per-function and per-exception counts
  and times, call arcs and collapsed stacks (written by
  :mod:`cstrace.render.calls`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

# Each analysis is imported on first use (PEP 562 ``__getattr__`` below): the call
# graph, symbols (pyelftools) and disassembly (capstone) are not loaded by a command
# that needs only the loss report. Type checkers see plain imports.
if TYPE_CHECKING:
    from cstrace.analyses.calls import CallProfile, CallTracker, call_profile
    from cstrace.analyses.coverage import (
        BranchCoverage,
        Coverage,
        CoverageCounter,
        FileCoverage,
        FunctionCoverage,
        LineCoverage,
        coverage_of_trace,
    )
    from cstrace.analyses.instructions import (
        Disassembler,
        Executed,
        Passed,
        RunWalker,
        iter_executed,
        walk_run,
    )
    from cstrace.analyses.loss import (
        AddressRange,
        LossCounter,
        LossReport,
        NotDecoded,
        Occurrence,
        Occurrences,
        SourceLoss,
        loss_report,
    )
    from cstrace.analyses.profile import (
        BinaryProfile,
        BranchSample,
        BranchSampler,
        Profile,
        ProfileCounter,
        image_resolver,
        profile_trace,
        resolver_for,
    )
    from cstrace.analyses.symbols import Function, SourceLine, Symbols

_LAZY_FROM: dict[str, tuple[str, ...]] = {
    "cstrace.analyses.calls": (
        "CallProfile",
        "CallTracker",
        "call_profile",
    ),
    "cstrace.analyses.coverage": (
        "BranchCoverage",
        "Coverage",
        "CoverageCounter",
        "FileCoverage",
        "FunctionCoverage",
        "LineCoverage",
        "coverage_of_trace",
    ),
    "cstrace.analyses.instructions": (
        "Disassembler",
        "Executed",
        "Passed",
        "RunWalker",
        "iter_executed",
        "walk_run",
    ),
    "cstrace.analyses.loss": (
        "AddressRange",
        "LossCounter",
        "LossReport",
        "NotDecoded",
        "Occurrence",
        "Occurrences",
        "SourceLoss",
        "loss_report",
    ),
    "cstrace.analyses.profile": (
        "BinaryProfile",
        "BranchSample",
        "BranchSampler",
        "Profile",
        "ProfileCounter",
        "image_resolver",
        "profile_trace",
        "resolver_for",
    ),
    "cstrace.analyses.symbols": (
        "Function",
        "SourceLine",
        "Symbols",
    ),
}
"""The public names imported on first use, by the module that defines them."""

__all__ = [
    "AddressRange",
    "BinaryProfile",
    "BranchCoverage",
    "BranchSample",
    "BranchSampler",
    "CallProfile",
    "CallTracker",
    "Coverage",
    "CoverageCounter",
    "Disassembler",
    "Executed",
    "FileCoverage",
    "Function",
    "FunctionCoverage",
    "LineCoverage",
    "LossCounter",
    "LossReport",
    "NotDecoded",
    "Occurrence",
    "Occurrences",
    "Passed",
    "Profile",
    "ProfileCounter",
    "RunWalker",
    "SourceLine",
    "SourceLoss",
    "Symbols",
    "call_profile",
    "coverage_of_trace",
    "image_resolver",
    "iter_executed",
    "loss_report",
    "profile_trace",
    "resolver_for",
    "walk_run",
]


if not TYPE_CHECKING:  # type checkers see the imports above, and no catch-all attribute
    from cstrace._lazy import lazy_exports as _lazy_exports

    __getattr__, __dir__ = _lazy_exports(__name__, _LAZY_FROM, __all__)
