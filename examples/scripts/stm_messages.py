"""Print the software messages of an STM (or DCC) trace: values as numbers, bytes as text.

Input: a snapshot or trace package; output: one line per message, with the
trace ID, master and channel, and the timestamp when the write carried one.

    python examples/scripts/stm_messages.py examples/stm_demo

Each ``SWTrace`` element is one write to a stimulus port. Single-byte writes
to a channel are gathered into a string up to the write that carries a marker
(the convention the example firmware follows: a marker on the last byte of a
message); wider writes are printed one per line, as numbers.
"""

from __future__ import annotations

import argparse

import cstrace


def main() -> None:
    """Print the messages of every software-trace source of SNAPSHOT."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("snapshot", help="snapshot folder or trace package")
    args = ap.parse_args()

    text: dict[tuple[int, int, int], bytearray] = {}  # (trace ID, master, channel) -> bytes

    def flush(key: tuple[int, int, int]) -> None:
        data = text.pop(key, None)
        if data:
            trace_id, master, channel = key
            shown = data.decode("latin-1").encode("unicode_escape").decode("ascii")
            print(f'{trace_id:#04x} {master:#04x}/{channel:<5} {"":>10}  "{shown}"')

    for trace_id, elem in cstrace.iter_elements(args.snapshot):
        match elem:
            case cstrace.SWTrace(master=master, channel=channel, payload=value) if elem.id_valid:
                key = (trace_id, master, channel)
                if elem.payload_bits == 8:
                    text.setdefault(key, bytearray()).append(value)
                    if elem.marker:
                        flush(key)
                    continue
                flush(key)
                stamp = "" if elem.timestamp is None else f"{elem.timestamp:#x}"
                # A write with no data (a flag, a trigger) has payload_bits 0.
                bits = elem.payload_bits
                data = f"0x{value:0{bits // 4}x}" if bits else "(no data)"
                flags = " marker" * elem.marker + " trigger" * elem.trigger
                print(f"{trace_id:#04x} {master:#04x}/{channel:<5} {stamp:>10}  {data}{flags}")
            case cstrace.EoTrace():
                for key in [k for k in text if k[0] == trace_id]:
                    flush(key)


if __name__ == "__main__":
    main()
