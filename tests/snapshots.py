"""Build small DS-5 snapshot folders for tests."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class Source:
    """A trace source device: name, type (``STM``, ``ETM4``...), registers, traced core."""

    name: str
    type: str
    regs: dict[str, int | str]
    core: str | None = None


@dataclass
class Core:
    """A core device with optional memory dumps ``(file, address, data, space)``."""

    name: str
    type: str = "Cortex-A53"
    dumps: list[tuple[str, int, bytes, str]] = field(default_factory=list)


@dataclass
class Buffer:
    """A trace buffer: name, contents, format, and the sources feeding it."""

    name: str
    data: bytes
    sources: list[str]
    format: str = "coresight"


def make_snapshot(
    root: Path,
    sources: list[Source],
    buffers: list[Buffer],
    cores: list[Core] | None = None,
) -> Path:
    """Write a snapshot folder under ``root`` and return it."""
    root.mkdir(parents=True, exist_ok=True)
    cores = cores or []
    devices: list[str] = []
    for core in cores:
        lines = ["[device]", f"name={core.name}", "class=core", f"type={core.type}", ""]
        for n, (fname, addr, data, space) in enumerate(core.dumps):
            (root / fname).write_bytes(data)
            lines += [f"[dump{n}]", f"file={fname}", f"address={addr:#x}", f"length={len(data):#x}"]
            if space:
                lines.append(f"space={space}")
            lines.append("")
        (root / f"{core.name}.ini").write_text("\n".join(lines) + "\n")
        devices.append(f"{core.name}.ini")
    for src in sources:
        lines = ["[device]", f"name={src.name}", "class=trace_source", f"type={src.type}", ""]
        lines.append("[regs]")
        for reg, value in src.regs.items():
            lines.append(f"{reg}={value:#x}" if isinstance(value, int) else f"{reg}={value}")
        (root / f"{src.name}.ini").write_text("\n".join(lines) + "\n")
        devices.append(f"{src.name}.ini")
    snap = ["[snapshot]", "version=1.0", "", "[device_list]"]
    snap += [f"device{n}={d}" for n, d in enumerate(devices)]
    snap += ["", "[trace]", "metadata=trace.ini", ""]
    (root / "snapshot.ini").write_text("\n".join(snap))
    trace = ["[trace_buffers]", "buffers=" + ",".join(f"buffer{n}" for n in range(len(buffers)))]
    for n, buf in enumerate(buffers):
        fname = f"{buf.name}.bin"
        (root / fname).write_bytes(buf.data)
        trace += ["", f"[buffer{n}]", f"name={buf.name}", f"file={fname}", f"format={buf.format}"]
    trace += ["", "[source_buffers]"]
    for buf in buffers:
        trace += [f"{s}={buf.name}" for s in buf.sources]
    trace += ["", "[core_trace_sources]"]
    trace += [f"{s.core}={s.name}" for s in sources if s.core]
    (root / "trace.ini").write_text("\n".join(trace) + "\n")
    return root
