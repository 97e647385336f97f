"""perf.data recordings (Linux ``perf record``, Android ``simpleperf record``) with CoreSight trace.

- :mod:`.records`: the file format: header, attributes, features, records;
- :mod:`.csetm`: the cs_etm AUXTRACE_INFO (one trace unit per CPU);
- :mod:`.adapter`: a recording as a :class:`~cstrace.trace.Trace` (sources,
  AUX data as buffers, the event log, the images found);
- :mod:`.kcore`: the kernel text ``perf record --kcore`` copies beside the recording.

:func:`is_perf_data` tells a perf.data file by its ``PERFILE2`` magic, and a
``perf record --kcore`` folder by its ``data`` file.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

# Imported on first use (PEP 562, :mod:`cstrace._lazy`): :func:`is_perf_data` alone, asked
# of every input, does not load the recording reader. Type checkers see plain imports.
if TYPE_CHECKING:
    from cstrace.inputs.perfdata.adapter import (
        AuxPiece,
        PerfImage,
        PerfRecording,
        open_perf_data,
        read_recording,
    )
    from cstrace.inputs.perfdata.csetm import CpuTrace, CsEtmInfo
    from cstrace.inputs.perfdata.kcore import KernelCore, read_kcore
    from cstrace.inputs.perfdata.records import PerfFile, read_perf_file

_LAZY_FROM: dict[str, tuple[str, ...]] = {
    "cstrace.inputs.perfdata.adapter": (
        "AuxPiece",
        "PerfImage",
        "PerfRecording",
        "open_perf_data",
        "read_recording",
    ),
    "cstrace.inputs.perfdata.csetm": ("CpuTrace", "CsEtmInfo"),
    "cstrace.inputs.perfdata.kcore": ("KernelCore", "read_kcore"),
    "cstrace.inputs.perfdata.records": ("PerfFile", "read_perf_file"),
}
"""The public names imported on first use, by the module that defines them."""

__all__ = [
    "AuxPiece",
    "CpuTrace",
    "CsEtmInfo",
    "KernelCore",
    "PerfFile",
    "PerfImage",
    "PerfRecording",
    "is_perf_data",
    "open_perf_data",
    "read_kcore",
    "read_perf_file",
    "read_recording",
]


def is_perf_data(path: str | Path) -> bool:
    """Whether ``path`` is a file that starts with perf.data's ``PERFILE2`` magic, or a
    ``perf record --kcore`` folder (its ``data`` file does)."""
    p = Path(path)
    try:
        if p.is_dir():
            p = p / "data"
        if not p.is_file():
            return False
        from cstrace.inputs.perfdata.records import MAGIC

        with open(p, "rb") as f:
            return f.read(8) in (MAGIC, MAGIC[::-1])
    except OSError:
        return False


if not TYPE_CHECKING:  # type checkers see the imports above, and no catch-all attribute
    from cstrace._lazy import lazy_exports as _lazy_exports

    __getattr__, __dir__ = _lazy_exports(__name__, _LAZY_FROM, __all__)
