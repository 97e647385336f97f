"""DCC software trace: the target-request protocol over the ARM7/ARM9 debug communications channel.

Input: the 32-bit words a debugger read from the DCC data register, in order
(capture format ``dcc_words``: little-endian words); output: trace-point and
debug-message packets and ``SWTRACE`` elements. Protocol (thesis ``seeds/004``
§6.3, "Target Request Protocol"): each message starts with a command word whose
bits [7:0] are the command:

- ``0x00`` trace message: bits [31:8] are a 24-bit trace-point number;
- ``0x01`` debug message: bits [15:8] give the type (0 ASCII string, 1 bytes,
  2 halfwords, 4 words), bits [31:16] the number of items; the items follow,
  packed little-endian into as many words as they need.

Elements: a trace point gives ``SWTRACE`` with master 0, channel 0 and a 24-bit
payload; each item of a debug message gives ``SWTRACE`` with master 1, the
type as channel, the item (a character for ASCII) as payload of 8, 16 or 32
bits, and the marker flag on the last item of the message.
"""

from __future__ import annotations

from cstrace.protocols.base import ProtocolSpec
from cstrace.protocols.dcc.protocol import (
    DccConfig,
    DebugMessage,
    MsgType,
    TracePoint,
    UnknownWord,
    encode_dcc,
    from_registers,
    iter_elements,
    iter_packets,
)

__all__ = [
    "PROTOCOL",
    "DccConfig",
    "DebugMessage",
    "MsgType",
    "TracePoint",
    "UnknownWord",
    "encode_dcc",
    "from_registers",
    "iter_elements",
    "iter_packets",
]

PROTOCOL = ProtocolSpec(
    name="dcc",
    from_registers=from_registers,
    iter_packets=iter_packets,
    iter_elements=iter_elements,
    uses_memory=False,
    software_trace=True,
    loss_packets=((UnknownWord, "bad", "UNKNOWN_WORD"),),
)
