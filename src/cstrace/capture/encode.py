"""Trace source bytes → CoreSight formatter frames (the inverse of demultiplexing).

Input: ``(trace_id, bytes)`` pieces in the order the sources emitted them; output:
16-byte frames as a formatter would write them into an ETB/ETR buffer. Used to
build test captures and example snapshots.

An ID change needs an ID byte at an even position. When the change falls on an
odd position, the even byte before it (data of the old ID) is moved after the
new ID byte and its flag bit is set, which tells the deformatter that this byte
still belongs to the old ID.
"""

from __future__ import annotations

from collections.abc import Iterable

__all__ = ["format_frames"]

_NULL_ID = 0x00


def format_frames(pieces: Iterable[tuple[int, bytes]], *, pad_id: int = _NULL_ID) -> bytes:
    """Frame the bytes of several trace IDs; the last frame is padded with ``pad_id`` data."""
    out = bytearray()
    frame = bytearray(16)
    flags = 0
    pos = 0
    cur = -1

    def finish() -> None:
        nonlocal frame, flags, pos
        frame[15] = flags
        out.extend(frame)
        frame = bytearray(16)
        flags = 0
        pos = 0

    def put_data(b: int) -> None:
        nonlocal flags, pos
        if pos % 2 == 0:
            frame[pos] = b & 0xFE
            flags |= (b & 1) << (pos // 2)
        else:
            frame[pos] = b
        pos += 1
        if pos == 15:
            finish()

    def switch(new: int) -> None:
        nonlocal flags, pos, cur
        if pos % 2 == 0:
            frame[pos] = (new << 1) | 1
            pos += 1
            if pos == 15:  # an ID in byte 14 applies to the next frame
                finish()
        else:
            # Move the old ID's byte at pos-1 behind the new ID byte, flagged as old.
            old = frame[pos - 1] | ((flags >> ((pos - 1) // 2)) & 1)
            flags &= ~(1 << ((pos - 1) // 2))
            frame[pos - 1] = (new << 1) | 1
            flags |= 1 << ((pos - 1) // 2)
            frame[pos] = old
            pos += 1
        cur = new

    for trace_id, data in pieces:
        if not data:
            continue
        if not 0 <= trace_id < 0x7F:
            raise ValueError(f"trace ID {trace_id:#x} out of range")
        for b in data:
            if trace_id != cur:
                switch(trace_id)
            put_data(b)
    if pos:
        if cur != pad_id:
            switch(pad_id)
        while pos:
            put_data(0)
    return bytes(out)
