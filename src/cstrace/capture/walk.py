# cython: boundscheck=False, wraparound=False
"""The byte walk of CoreSight formatter frames: the deformatter's inner loop.

Input: whole 16-byte frames (see :mod:`cstrace.capture.formatter` for the
rules) and arrays to write to; output: every data byte of the trace IDs asked
for, with its run numbering, and counts of the bytes and runs of every owner.

The rules are a small state machine on bytes (an ID byte changes the owner of
what follows, except the next byte when its flag bit says so), so the frames are
walked one byte at a time; when compiled (a hot module, with ``walk.pxd``), this
runs on C locals over the capture's buffer. Cython's bounds checks are off for
this module: the caller, ``formatter._Unpacker``, checks the frames and indices
it hands over and sizes every array for the most the frames can write.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

__all__ = ["ID_BYTES", "NONE", "walk"]

NONE = 0xFF
"""Owner number of the bytes no trace ID owns: flag bytes, and data before the
first ID byte of a capture (ID bytes too, in the counts)."""
ID_BYTES = 0xFE
"""The counter of ID bytes, beside the owners' (no trace ID has this number)."""
_NONE = NONE  # (C copies when compiled)
_ID_BYTES = ID_BYTES


def walk(
    data: bytes,
    first: int,
    n: int,
    sof: npt.NDArray[np.int64],
    cur: int,
    keep: npt.NDArray[np.uint8],
    stops: npt.NDArray[np.uint8],
    named: npt.NDArray[np.uint8],
    wpos: npt.NDArray[np.int64],
    wbase: npt.NDArray[np.int64],
    values: npt.NDArray[np.uint8],
    rpos: npt.NDArray[np.int64],
    run_pos: npt.NDArray[np.int64],
    run_idx: npt.NDArray[np.int64],
) -> int:
    """Walk ``n`` frames of ``data`` (the first at byte ``first``, at capture index
    ``sof[k]`` for frame k), starting with ``cur`` the ID in effect (:data:`NONE`
    for none).

    Per owner o (a trace ID, or :data:`NONE`): ``wpos[o]`` goes up by one for
    each of its bytes and ``rpos[o]`` by one for each of its runs; when
    ``keep[o]``, its bytes are written to ``values[wpos[o]]`` and its runs'
    stream positions (``wpos[o] - wbase[o]`` at their first byte) and capture
    indices to ``run_pos``/``run_idx[rpos[o]]``. ``named[t]`` is set for every
    trace ID an ID byte names. Stops after a frame that hands a trace ID with
    ``stops[t]`` an empty block (see ``formatter._Unpacker``). ``wpos[ID_BYTES]``
    counts the ID bytes.

    Returns the frames walked times 512, plus 256 if the walk stopped at such a
    frame, plus the ID in effect after them.
    """
    done = n
    stopped = 0
    for f in range(n):
        p = first + 16 * f
        flags = data[p + 15]
        index = int(sof[f])
        count = 0  # data bytes of the frame since the last run start
        start = 0  # offset in the frame of that start (OpenCSD's index numbering)
        open_run = False
        changing = False  # an ID byte changed the ID; its odd byte is next
        flagged = 0
        new = 0
        wpos[_NONE] += 1  # the flag byte
        ids = data[p] | data[p + 2] | data[p + 4] | data[p + 6]
        ids |= data[p + 8] | data[p + 10] | data[p + 12] | data[p + 14]
        if not ids & 1:
            # No ID byte (most frames): 15 bytes of the current ID, in one run.
            o = cur
            if keep[o]:
                w = wpos[o]
                r = rpos[o]
                run_pos[r] = w - wbase[o]
                run_idx[r] = index
                for i in range(0, 14, 2):
                    values[w + i] = data[p + i] | ((flags >> (i >> 1)) & 1)
                    values[w + i + 1] = data[p + i + 1]
                values[w + 14] = data[p + 14] | (flags >> 7)
            wpos[o] += 15
            rpos[o] += 1
            continue
        for i in range(15):
            b = data[p + i]
            after = False
            if i & 1 == 0:
                if b & 1:  # an ID byte
                    wpos[_ID_BYTES] += 1
                    new = b >> 1
                    named[new] = 1
                    if i == 14:
                        cur = new  # (it only sets the ID of the next frame)
                    elif new != cur:
                        changing = True
                        flagged = (flags >> (i >> 1)) & 1
                        if flagged and i == 12 and data[p + 14] & 1 and stops[new]:
                            done = f + 1
                            stopped = 1
                    continue
                v = b | ((flags >> (i >> 1)) & 1)
                o = cur
            else:
                v = b
                o = cur
                if changing:
                    changing = False
                    if flagged:
                        after = True  # this byte is still the old ID's
                    else:
                        if count > 0:
                            start = i - 1
                            count = 0
                        open_run = False
                        cur = new
                        o = new
            if not open_run:
                open_run = True
                if keep[o]:
                    run_pos[rpos[o]] = wpos[o] - wbase[o]
                    run_idx[rpos[o]] = index + start + count
                rpos[o] += 1
            if keep[o]:
                values[wpos[o]] = v
            wpos[o] += 1
            count += 1
            if after:
                start = i - 1
                count = 0
                open_run = False
                cur = new
        if stopped:
            break
    return done * 512 + stopped * 256 + cur
