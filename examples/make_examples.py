"""Build the example snapshots in ``examples/`` with cstrace's own encoders.

    python examples/make_examples.py

``stm_demo``: a firmware boot log written through a CoreSight STM (trace ID
0x20) into an ETB: boot stages on channel 0 (32-bit values with markers), a
text message on channel 1 (bytes, a marker on the last one), sensor readings
on channel 2 (16-bit values with timestamps). The STP packets are framed into
16-byte CoreSight formatter frames, as an ETB would hold them.
"""

from __future__ import annotations

from pathlib import Path

from cstrace.capture.encode import format_frames
from cstrace.protocols.stm.encoder import StmMessage, encode_messages

HERE = Path(__file__).resolve().parent

SNAPSHOT_INI = """\
[snapshot]
version=1.0
description={description}

[device_list]
{devices}

[trace]
metadata=trace.ini
"""


def write_snapshot(
    root: Path,
    description: str,
    devices: dict[str, str],
    buffers: list[tuple[str, str, bytes, str]],
    source_buffers: dict[str, str],
    core_sources: dict[str, str],
) -> None:
    """Write a DS-5 snapshot: device files, ``snapshot.ini``, ``trace.ini`` and buffers."""
    root.mkdir(parents=True, exist_ok=True)
    dev_lines = []
    for n, (fname, text) in enumerate(devices.items()):
        (root / fname).write_text(text)
        dev_lines.append(f"device{n}={fname}")
    (root / "snapshot.ini").write_text(
        SNAPSHOT_INI.format(description=description, devices="\n".join(dev_lines))
    )
    trace = ["[trace_buffers]", "buffers=" + ",".join(f"buffer{n}" for n in range(len(buffers)))]
    for n, (name, fname, data, fmt) in enumerate(buffers):
        (root / fname).write_bytes(data)
        trace += ["", f"[buffer{n}]", f"name={name}", f"file={fname}", f"format={fmt}"]
    trace += ["", "[source_buffers]", *(f"{s}={b}" for s, b in source_buffers.items())]
    trace += ["", "[core_trace_sources]", *(f"{c}={s}" for c, s in core_sources.items())]
    (root / "trace.ini").write_text("\n".join(trace) + "\n")


def stm_demo(root: Path) -> None:
    """The STM boot-log example."""
    master = 0x40
    ts = 0x1000
    messages: list[StmMessage] = []
    for stage in (0x100, 0x200, 0x300):
        ts += 0x250
        messages.append(StmMessage(master, 0, stage, bits=32, marker=True, timestamp=ts))
    text = b"boot ok\n"
    for n, ch in enumerate(text):
        messages.append(StmMessage(master, 1, ch, bits=8, marker=n == len(text) - 1))
    for reading in (0x0123, 0x0130, 0x0142, 0x0151):
        ts += 0x80
        messages.append(StmMessage(master, 2, reading, bits=16, timestamp=ts))
    stp = encode_messages(messages)
    trace_id = 0x20
    frames = format_frames([(trace_id, stp)])
    stm_ini = (
        "[device]\nname=STM_0\nclass=trace_source\ntype=STM\n\n"
        f"[regs]\nSTMTCSR(0x3A0)={0x00800007 | (trace_id << 16):#010x}\n"
    )
    write_snapshot(
        root,
        "cstrace example: STM boot log in an ETB",
        {"STM_0.ini": stm_ini},
        [("ETB_0", "etb_0.bin", frames, "coresight")],
        {"STM_0": "ETB_0"},
        {},
    )


def main() -> None:
    """Regenerate every example."""
    stm_demo(HERE / "stm_demo")
    print(f"wrote {HERE / 'stm_demo'}")


if __name__ == "__main__":
    main()
