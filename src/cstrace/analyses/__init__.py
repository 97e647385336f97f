"""Analyses built on decoded trace: what a program did, summed over a trace.

- :mod:`cstrace.analyses.profile`: execution profiles (instruction ranges and
  taken branches with counts, per program binary) and synthesised branch-stack
  samples, for AutoFDO, llvm-profgen, BOLT and tools that read perf's text
  (written by :mod:`cstrace.render.profiles`).
"""

from __future__ import annotations

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

__all__ = [
    "BinaryProfile",
    "BranchSample",
    "BranchSampler",
    "Profile",
    "ProfileCounter",
    "image_resolver",
    "profile_trace",
    "resolver_for",
]
