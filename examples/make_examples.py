"""Build the example snapshots in ``examples/`` with cstrace's own encoders.

    python examples/make_examples.py

Input: nothing but this file (the programs, the trace-unit models and the
register values are written out below). Output: one DS-5 snapshot folder per
example, which ``cstrace decode examples/NAME`` reads.

``stm_demo``: a firmware boot log written through a CoreSight STM (trace ID
0x20) into an ETB: boot stages on channel 0 (32-bit values with markers), a
text message on channel 1 (bytes, a marker on the last one), sensor readings
on channel 2 (16-bit values with timestamps). The STP packets are framed into
16-byte CoreSight formatter frames, as an ETB would hold them.

``etm_demo``: a Cortex-A53 running a small A64 program, traced by its ETMv4.0
trace unit (trace ID 0x10), with an STM (trace ID 0x20) in the same formatter
frames of one ETB. The user program (EL0, context ID 42) sums the squares of
3, 2 and 1 in a loop that calls a function, then makes two system calls; the
kernel's handler (EL1) writes the sum, then the exit code, to STM stimulus
ports and parks the core. How it is made:

1. the program is assembled by hand (:class:`Asm` and the ``a64_*`` encoders,
   Arm ARM C6 "A64 base instruction descriptions");
2. a tiny model of the core (:func:`run_program`) executes the machine code
   from the memory images, one instruction at a time, and records what
   happened (:class:`Step`): address, exception level, whether a branch was
   taken, exceptions, stores to the STM's stimulus ports, the time;
3. a model of the trace unit (:func:`etm_trace`) turns those steps into ETMv4
   packets with :mod:`cstrace.protocols.etmv4.encoder`, as IHI0064 chapter 6
   describes: one atom per branch (E taken, N not taken), an address packet
   after each taken indirect branch, address-with-context packets when the
   exception level changes, an exception packet with the preferred return
   address for the SVCs, timestamps at synchronisation and on exception entry;
4. a model of the STM (:func:`stm_trace`) turns the stores into STPv2 packets
   (:mod:`cstrace.protocols.stm.encoder`);
5. both byte streams, interleaved in the order the sources produced them, are
   framed by :func:`cstrace.capture.encode.format_frames`.

``tests/unit/test_examples.py`` regenerates every example, checks that the
result is byte-identical to the committed folders, and checks the decoded
trace against the model's execution.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from cstrace.capture.encode import format_frames
from cstrace.protocols.etmv4 import encoder as etm
from cstrace.protocols.stm.encoder import StmEncoder, StmMessage, encode_messages, pack_nibbles
from cstrace.protocols.stm.packets import C8, C16, M8, Async, Data, Null, Version

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
    files: dict[str, bytes] | None = None,
) -> None:
    """Write a DS-5 snapshot: devices, ``snapshot.ini``, ``trace.ini``, buffers and ``files``."""
    root.mkdir(parents=True, exist_ok=True)
    for fname, data in (files or {}).items():
        (root / fname).write_bytes(data)
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


# ------------------------------------------------------------------------------ stm_demo


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


# ------------------------------------------------------------------- A64 encodings
# Arm ARM (DDI 0487) C6.2; registers are numbers, 31 is XZR (or SP, unused here).

XZR = 31
LR = 30
COND = {"eq": 0x0, "ne": 0x1, "hs": 0x2, "lo": 0x3, "mi": 0x4, "pl": 0x5, "ge": 0xA, "lt": 0xB}


def a64_movz(rd: int, imm16: int, shift: int = 0) -> int:
    """MOVZ Xd, #imm16, LSL #shift (move wide with zero)."""
    return 0xD2800000 | (shift // 16) << 21 | (imm16 & 0xFFFF) << 5 | rd


def a64_mov(rd: int, rm: int) -> int:
    """MOV Xd, Xm (ORR Xd, XZR, Xm, shifted register)."""
    return 0xAA000000 | rm << 16 | XZR << 5 | rd


def a64_add(rd: int, rn: int, rm: int) -> int:
    """ADD Xd, Xn, Xm (shifted register, no shift)."""
    return 0x8B000000 | rm << 16 | rn << 5 | rd


def a64_subs(rd: int, rn: int, imm12: int) -> int:
    """SUBS Xd, Xn, #imm12 (CMP Xn, #imm12 when Xd is XZR)."""
    return 0xF1000000 | (imm12 & 0xFFF) << 10 | rn << 5 | rd


def a64_mul(rd: int, rn: int, rm: int) -> int:
    """MUL Xd, Xn, Xm (MADD Xd, Xn, Xm, XZR)."""
    return 0x9B000000 | rm << 16 | XZR << 10 | rn << 5 | rd


def a64_lsr(rd: int, rn: int, shift: int) -> int:
    """LSR Xd, Xn, #shift (UBFM Xd, Xn, #shift, #63)."""
    return 0xD3400000 | shift << 16 | 63 << 10 | rn << 5 | rd


def a64_mrs_esr_el1(rt: int) -> int:
    """MRS Xt, ESR_EL1 (op0=3, op1=0, CRn=5, CRm=2, op2=0)."""
    return 0xD5385200 | rt


def a64_str_w(rt: int, rn: int, offset: int) -> int:
    """STR Wt, [Xn, #offset] (unsigned offset, a multiple of 4)."""
    return 0xB9000000 | (offset // 4) << 10 | rn << 5 | rt


def a64_b(pc: int, target: int) -> int:
    """B target."""
    return 0x14000000 | ((target - pc) >> 2) & 0x3FFFFFF


def a64_bl(pc: int, target: int) -> int:
    """BL target (branch with link)."""
    return 0x94000000 | ((target - pc) >> 2) & 0x3FFFFFF


def a64_bcond(pc: int, cond: str, target: int) -> int:
    """B.cond target."""
    return 0x54000000 | (((target - pc) >> 2) & 0x7FFFF) << 5 | COND[cond]


def a64_svc(imm16: int) -> int:
    """SVC #imm16 (supervisor call)."""
    return 0xD4000001 | imm16 << 5


A64_RET = 0xD65F03C0  # RET (X30)
A64_ERET = 0xD69F03E0  # ERET


Encode = Callable[[int, dict[str, int]], int]
"""Builds an instruction word from its address and the program's labels."""


class Asm:
    """A two-pass assembler for a list of A64 instructions with labels and comments."""

    def __init__(self, base: int) -> None:
        self.base = base
        self.labels: dict[str, int] = {}
        self.items: list[tuple[int, str, Encode, str]] = []

    @property
    def pc(self) -> int:
        """The address of the next instruction."""
        return self.base + 4 * len(self.items)

    def label(self, name: str) -> None:
        """Name the next instruction's address."""
        self.labels[name] = self.pc

    def op(self, text: str, word: int | Encode, comment: str = "") -> None:
        """Add one instruction: its assembly text, its word (or how to build it), a comment."""
        if callable(word):
            self.items.append((self.pc, text, word, comment))
        else:
            fixed = word
            self.items.append((self.pc, text, lambda pc, labels: fixed, comment))

    def code(self) -> bytes:
        """The machine code, little-endian."""
        return b"".join(
            make(pc, self.labels).to_bytes(4, "little") for pc, _, make, _ in self.items
        )

    def listing(self) -> list[str]:
        """One line per instruction: address, word, labels, assembly, comment."""
        names = {a: n for n, a in self.labels.items()}
        lines = []
        for pc, text, make, comment in self.items:
            label = f"{names[pc]}:" if pc in names else ""
            line = f"{pc:016x}  {make(pc, self.labels):08x}  {label:<10} {text:<24}"
            lines.append((line + (f"; {comment}" if comment else "")).rstrip())
        return lines


# ----------------------------------------------------------------- the etm_demo program

USER_BASE = 0x0000_0000_0040_0000  # the user program, EL0
VBAR_EL1 = 0xFFFF_FFC0_0008_0000  # the kernel's vector table, EL1
EL0_SYNC = VBAR_EL1 + 0x400  # synchronous exception from a lower EL using AArch64
STM_PORTS = 0x2800_0000  # the STM's extended stimulus ports: 256 bytes a channel
CONTEXT_ID = 42  # CONTEXTIDR_EL1 of the user process (its PID)
SYS_WRITE = 64
SYS_EXIT = 93


def user_program() -> Asm:
    """The EL0 program: sum of i*i for i = 3, 2, 1, then write(sum) and exit(0)."""
    a = Asm(USER_BASE)
    a.label("_start")
    a.op("mov x19, #0", a64_movz(19, 0), "sum = 0")
    a.op("mov x20, #3", a64_movz(20, 3), "i = 3")
    a.label("loop")
    a.op("mov x0, x20", a64_mov(0, 20))
    a.op("bl square", lambda pc, lb: a64_bl(pc, lb["square"]), "x0 = i * i")
    a.op("add x19, x19, x0", a64_add(19, 19, 0), "sum += i * i")
    a.op("subs x20, x20, #1", a64_subs(20, 20, 1), "i -= 1")
    a.op("b.ne loop", lambda pc, lb: a64_bcond(pc, "ne", lb["loop"]), "three times round")
    a.op("mov x0, x19", a64_mov(0, 19), "write(sum)")
    a.op(f"mov x8, #{SYS_WRITE}", a64_movz(8, SYS_WRITE))
    a.op("svc #0", a64_svc(0), "-> kernel (EL1)")
    a.op("mov x0, #0", a64_movz(0, 0), "exit(0)")
    a.op(f"mov x8, #{SYS_EXIT}", a64_movz(8, SYS_EXIT))
    a.op("svc #0", a64_svc(0), "-> kernel, does not return")
    a.label("square")
    a.op("mul x0, x0, x0", a64_mul(0, 0, 0))
    a.op("ret", A64_RET)
    return a


def kernel_handler() -> Asm:
    """The EL1 handler at VBAR_EL1 + 0x400: system calls write (to the STM) and exit."""
    a = Asm(EL0_SYNC)
    a.label("el0_sync")
    a.op("mrs x9, esr_el1", a64_mrs_esr_el1(9), "exception syndrome")
    a.op("lsr x9, x9, #26", a64_lsr(9, 9, 26), "exception class")
    a.op("cmp x9, #0x15", a64_subs(XZR, 9, 0x15), "SVC from AArch64?")
    a.op("b.ne panic", lambda pc, lb: a64_bcond(pc, "ne", lb["panic"]))
    a.op("mov x10, #0x28000000", a64_movz(10, STM_PORTS >> 16, 16), "STM stimulus ports")
    a.op(f"cmp x8, #{SYS_EXIT}", a64_subs(XZR, 8, SYS_EXIT))
    a.op("b.eq sys_exit", lambda pc, lb: a64_bcond(pc, "eq", lb["sys_exit"]))
    a.op("str w0, [x10, #0x10]", a64_str_w(0, 10, 0x10), "channel 0, G_DTS: data + timestamp")
    a.op("eret", A64_ERET, "back to EL0")
    a.label("sys_exit")
    a.op("str w0, [x10, #0x100]", a64_str_w(0, 10, 0x100), "channel 1, G_DMTS: + marker")
    a.label("halt")
    a.op("b halt", lambda pc, lb: a64_b(pc, lb["halt"]), "park the core")
    a.label("panic")
    a.op("b panic", lambda pc, lb: a64_b(pc, lb["panic"]))
    return a


# ------------------------------------------------------------------- a model of the core

ESR_EC_SVC64 = 0x15  # ESR_ELx.EC: SVC executed in AArch64 state
ETM_EXCP_CALL = 0x2  # ETMv4 exception type: call (SVC, HVC, SMC); IHI0064 table 6-12
TS_START = 0x100000  # global timestamp at the first traced instruction
TS_PER_INSTR = 3  # global timestamp ticks per instruction (a made-up but steady clock)


@dataclass
class Step:
    """One executed instruction, as the core model saw it."""

    pc: int
    el: int
    word: int
    time: int
    next_pc: int
    branch: str = ""
    """``direct``/``indirect`` for a branch (an ETMv4 P0 instruction), else empty."""
    taken: bool = False
    exception: int | None = None
    """ETMv4 exception type when the instruction raised an exception (SVC)."""
    store: tuple[int, int] | None = None
    """(address, 32-bit value) of a store."""


@dataclass
class Core:
    """Architectural state the model needs: X registers, NZCV, PC, EL and a few system registers."""

    pc: int
    el: int = 0
    x: list[int] = field(default_factory=lambda: [0] * 32)
    nzcv: tuple[bool, bool, bool, bool] = (False, False, False, False)
    elr_el1: int = 0
    esr_el1: int = 0


def _cond_holds(cond: int, nzcv: tuple[bool, bool, bool, bool]) -> bool:
    """The A64 condition ``cond`` (Arm ARM C1.2.4) under the flags ``nzcv``."""
    n, z, c, v = nzcv
    base = (z, c, n, v, c and not z, n == v, n == v and not z, True)[cond >> 1]
    return not base if cond & 1 and cond != 0xF else base


def _sext(value: int, bits: int) -> int:
    return value - (1 << bits) if value >> (bits - 1) & 1 else value


def run_program(
    images: Iterable[tuple[int, bytes]], start: int, *, spins: int = 3, max_steps: int = 1000
) -> list[Step]:
    """Execute the A64 code in ``images`` from ``start`` at EL0; one :class:`Step` each.

    Knows only the instructions the example uses (it raises on any other), the
    SVC exception to EL1 (ESR_EL1, ELR_EL1, vector VBAR_EL1 + 0x400) and ERET.
    Stops when a branch to itself (the core parked) has run ``spins`` times, or
    after ``max_steps`` instructions.
    """
    regions = list(images)
    mask = (1 << 64) - 1

    def fetch(address: int) -> int:
        for base, data in regions:
            if base <= address < base + len(data):
                off = address - base
                return int.from_bytes(data[off : off + 4], "little")
        raise ValueError(f"no code at {address:#x}")

    core = Core(start)
    x = core.x
    steps: list[Step] = []
    for n in range(max_steps):
        pc, w = core.pc, fetch(core.pc)
        step = Step(pc, core.el, w, TS_START + n * TS_PER_INSTR, pc + 4)
        rd, rn, rm = w & 0x1F, (w >> 5) & 0x1F, (w >> 16) & 0x1F
        if w & 0xFF800000 == 0xD2800000:  # MOVZ
            x[rd] = ((w >> 5) & 0xFFFF) << (16 * ((w >> 21) & 3))
        elif w & 0xFFE0FFE0 == 0xAA0003E0:  # MOV (ORR Xd, XZR, Xm)
            x[rd] = x[rm]
        elif w & 0xFFE0FC00 == 0x8B000000:  # ADD (shifted register, LSL #0)
            x[rd] = (x[rn] + x[rm]) & mask
        elif w & 0xFFC00000 == 0xF1000000:  # SUBS (immediate)
            a, b = x[rn], (w >> 10) & 0xFFF
            r = (a - b) & mask
            signed = _sext(a, 64) - b
            core.nzcv = (bool(r >> 63), r == 0, a >= b, signed != _sext(r, 64))
            x[rd] = r
        elif w & 0xFFE0FC00 == 0x9B007C00:  # MUL (MADD with XZR)
            x[rd] = (x[rn] * x[rm]) & mask
        elif w & 0xFFC0FC00 == 0xD340FC00:  # LSR (UBFM, imms = 63)
            x[rd] = x[rn] >> ((w >> 16) & 0x3F)
        elif w & 0xFFFFFFE0 == 0xD5385200:  # MRS Xt, ESR_EL1
            x[rd] = core.esr_el1
        elif w & 0xFFC00000 == 0xB9000000:  # STR Wt, [Xn, #imm]
            step.store = (x[rn] + ((w >> 10) & 0xFFF) * 4, x[rd] & 0xFFFFFFFF)
        elif w & 0x7C000000 == 0x14000000:  # B, BL
            step.branch, step.taken = "direct", True
            step.next_pc = (pc + 4 * _sext(w & 0x3FFFFFF, 26)) & mask
            if w >> 31:
                x[LR] = pc + 4
        elif w & 0xFF000010 == 0x54000000:  # B.cond
            step.branch = "direct"
            step.taken = _cond_holds(w & 0xF, core.nzcv)
            if step.taken:
                step.next_pc = (pc + 4 * _sext((w >> 5) & 0x7FFFF, 19)) & mask
        elif w == A64_RET:
            step.branch, step.taken, step.next_pc = "indirect", True, x[LR]
        elif w == A64_ERET:
            step.branch, step.taken, step.next_pc = "indirect", True, core.elr_el1
            core.el = 0
        elif w & 0xFFE0001F == 0xD4000001:  # SVC: exception to EL1
            step.exception = ETM_EXCP_CALL
            core.esr_el1 = ESR_EC_SVC64 << 26 | 1 << 25 | ((w >> 5) & 0xFFFF)
            core.elr_el1 = pc + 4
            core.el = 1
            step.next_pc = EL0_SYNC
        else:
            raise ValueError(f"the model does not know {w:08x} at {pc:#x}")
        x[XZR] = 0
        core.pc = step.next_pc
        steps.append(step)
        spins -= step.taken and step.next_pc == pc
        if spins <= 0:
            break
    return steps


# -------------------------------------------------------- models of the ETM and the STM

ETM_TRACE_ID = 0x10
STM_TRACE_ID = 0x20
STM_MASTER = 0x40  # the master number the interconnect gives the core's writes
STM_TS_NIBBLES = (1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 14, 16)  # STPv2 timestamp lengths


def _atom_packets(atoms: str) -> bytes:
    """Atom packets for ``atoms`` (oldest first), each carrying as many atoms as a format allows."""
    out = b""
    while atoms:
        for n in range(min(len(atoms), 24), 0, -1):
            try:
                out += etm.atom(atoms[:n])
            except ValueError:
                continue
            atoms = atoms[n:]
            break
    return out


def etm_trace(steps: list[Step]) -> list[tuple[int, bytes]]:
    """The ETMv4 trace of ``steps``: a list of (step index, bytes the trace unit emitted then).

    Configuration (see :func:`etm_demo`): no cycle counts, no return stack, no
    speculation (every P0 element is committed at once), context ID tracing
    and timestamps on.
    """
    addrs = etm.AddressEncoder()

    def with_context(address: int, el: int) -> bytes:
        addrs.history = [(address, 0), *addrs.history[:2]]
        return etm.address_context(address, el=el, sf=True, ns=True, context_id=CONTEXT_ID)

    first = steps[0]
    out: list[tuple[int, bytes]] = [
        (
            0,
            etm.a_sync()
            + etm.trace_info(0)
            + etm.trace_on()
            + with_context(first.pc, first.el)
            + etm.timestamp(first.time),
        )
    ]
    atoms = ""
    for n, step in enumerate(steps):
        packets = b""
        if step.branch:
            atoms += "E" if step.taken else "N"
            if step.branch == "indirect":
                # the target of a taken indirect branch follows its atom; with the
                # exception level changed (ERET), with the new context
                packets = _atom_packets(atoms)
                atoms = ""
                el_after = steps[n + 1].el if n + 1 < len(steps) else step.el
                if el_after != step.el:
                    packets += with_context(step.next_pc, el_after)
                else:
                    packets += addrs.encode(step.next_pc)
        elif step.exception is not None:
            # atoms so far, the exception with its preferred return address, then
            # the vector with the new context, and the time of the exception entry
            packets = _atom_packets(atoms) + etm.exception(step.exception, addr_interp=1)
            atoms = ""
            packets += addrs.encode(step.pc + 4)
            packets += with_context(step.next_pc, 1)
            packets += etm.timestamp(step.time + TS_PER_INSTR)
        if packets:
            out.append((n, packets))
    if atoms:
        out.append((len(steps) - 1, _atom_packets(atoms)))
    return out


def stm_trace(steps: list[Step]) -> list[tuple[int, bytes]]:
    """The STM trace of the stores to the stimulus ports: (step index, bytes) pieces.

    A store to channel ``c`` lands at ``STM_PORTS + 0x100 * c + type``; the type
    offset's bit 3 clear asks for a timestamp, bit 4 clear for a marker (the
    guaranteed ports G_DMTS 0x00, G_DM 0x08, G_DTS 0x10, G_D 0x18). The first
    write is preceded by ASYNC, VERSION and the master; a channel packet is
    sent when the channel changes. Odd nibble counts are padded with a NULL.
    """
    enc = StmEncoder()
    out: list[tuple[int, bytes]] = []
    channel = -1
    for n, step in enumerate(steps):
        if step.store is None or not 0 <= step.store[0] - STM_PORTS < 0x10000 * 0x100:
            continue
        offset, value = step.store[0] - STM_PORTS, step.store[1]
        nibs: list[int] = []
        if not out:
            nibs += enc.packet_nibbles(Async(0, b""))
            nibs += enc.packet_nibbles(Version(0, b"", 3))
            nibs += enc.packet_nibbles(M8(0, b"", STM_MASTER))
        if offset >> 8 != channel:
            new = offset >> 8
            chan = C8(0, b"", new) if channel >= 0 and new >> 8 == channel >> 8 else None
            nibs += enc.packet_nibbles(chan or C16(0, b"", new))
            channel = new
        kind = offset & 0xFF
        ts = None if kind & 0x08 else step.time
        # send the fewest timestamp nibbles that update the last timestamp sent
        ts_bits = 0
        if ts is not None:
            ts_bits = next(4 * k for k in STM_TS_NIBBLES if enc.ts >> 4 * k == ts >> 4 * k)
        nibs += enc.packet_nibbles(Data(0, b"", 32, value, not kind & 0x10, ts, ts_bits))
        if len(nibs) % 2:
            nibs += enc.packet_nibbles(Null(0, b"", None, 0))
        out.append((n, pack_nibbles(nibs)))
    return out


# --------------------------------------------- the program as an ELF file, with DWARF
# What a toolchain would have written for the etm_demo program, so that ``--image
# program.elf`` gives the snapshot function names and source lines: an ELF64 executable
# (ELF for the Arm 64-bit Architecture) with one PT_LOAD per piece of code, a symbol table
# (functions, and the ``$x`` mapping symbols that mark A64 code), and DWARF 4 (DWARF
# Debugging Information Format v4: §6.2 line numbers, §7.5 the compile unit) naming
# ``program.s``, the assembly source written beside it, line by line.

_PF_R_X = 0x5
_SHF_ALLOC_EXEC = 0x6


@dataclass
class Piece:
    """One piece of code of the image: its address, bytes, and the source line of each word."""

    name: str
    address: int
    code: bytes
    lines: list[int]


def _uleb(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out)


def _sleb(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        done = (value == 0 and not byte & 0x40) or (value == -1 and byte & 0x40)
        out.append(byte | (0 if done else 0x80))
        if done:
            return bytes(out)


def _debug_line(pieces: list[Piece], source: str) -> bytes:
    """A DWARF 4 line program: one row per instruction, a sequence per piece (§6.2.5)."""
    header = bytes((4, 1, 1, 0xFB, 14, 13))  # min insn length, max ops, is_stmt, base, range
    header += bytes((0, 1, 1, 1, 1, 0, 0, 0, 1, 0, 0, 1))  # standard opcode lengths
    header += b"\0"  # no include directories
    header += source.encode() + b"\0" + _uleb(0) + _uleb(0) + _uleb(0) + b"\0"
    program = bytearray()
    for piece in pieces:
        program += b"\0" + _uleb(9) + b"\x02" + piece.address.to_bytes(8, "little")
        line = 1
        for n, at in enumerate(piece.lines):
            if n:
                program += b"\x02" + _uleb(1)  # DW_LNS_advance_pc: one instruction
            program += b"\x03" + _sleb(at - line) + b"\x01"  # advance_line, copy
            line = at
        program += b"\x02" + _uleb(1) + b"\0\x01\x01"  # past the last; DW_LNE_end_sequence
    body = (4).to_bytes(2, "little") + len(header).to_bytes(4, "little") + header + program
    return len(body).to_bytes(4, "little") + body


def _debug_info(functions: list[tuple[str, int, int, int]], source: str) -> tuple[bytes, bytes]:
    """``.debug_abbrev`` and ``.debug_info``: a compile unit and its subprograms (§7.5)."""
    abbrev = b"\x01\x11\x01" + b"\x03\x08\x25\x08\x13\x05\x10\x17" + b"\0\0"
    abbrev += b"\x02\x2e\x00" + b"\x03\x08\x3a\x0b\x3b\x05\x11\x01\x12\x07\x3f\x19" + b"\0\0"
    abbrev += b"\0"
    dies = b"\x01" + source.encode() + b"\0" + b"make_examples.py\0"
    dies += (0x8001).to_bytes(2, "little")  # DW_LANG_Mips_Assembler
    dies += (0).to_bytes(4, "little")  # DW_AT_stmt_list: the only line program
    for name, start, size, line in functions:
        dies += b"\x02" + name.encode() + b"\0" + bytes((1,)) + line.to_bytes(2, "little")
        dies += start.to_bytes(8, "little") + size.to_bytes(8, "little")
    dies += b"\0"
    body = (4).to_bytes(2, "little") + (0).to_bytes(4, "little") + bytes((8,)) + dies
    return abbrev, len(body).to_bytes(4, "little") + body


def elf_image(
    pieces: list[Piece], functions: list[tuple[str, int, int, int]], source: str
) -> bytes:
    """An AArch64 ELF executable holding ``pieces``, with symbols and DWARF line numbers.

    ``functions``: (name, start, size, source line) of each function.
    """
    strtab = bytearray(b"\0")

    def string(table: bytearray, text: str) -> int:
        at = len(table)
        table += text.encode() + b"\0"
        return at

    shstrtab = bytearray(b"\0")
    abbrev, info = _debug_info(functions, source)
    line = _debug_line(pieces, source)
    # Symbols: the null one, the source file, a $x per piece (locals), then the functions.
    symtab = bytearray(24)
    symtab += string(strtab, source).to_bytes(4, "little") + bytes((0x04, 0))  # STT_FILE
    symtab += (0xFFF1).to_bytes(2, "little") + bytes(16)  # SHN_ABS
    for n, piece in enumerate(pieces, 1):
        symtab += string(strtab, "$x").to_bytes(4, "little") + bytes((0x00, 0))
        symtab += n.to_bytes(2, "little") + piece.address.to_bytes(8, "little") + bytes(8)
    first_global = len(symtab) // 24
    for name, start, size, _ in functions:
        shndx = next(
            n for n, p in enumerate(pieces, 1) if p.address <= start < p.address + len(p.code)
        )
        symtab += string(strtab, name).to_bytes(4, "little") + bytes((0x12, 0))  # GLOBAL FUNC
        symtab += shndx.to_bytes(2, "little") + start.to_bytes(8, "little")
        symtab += size.to_bytes(8, "little")

    phoff, phnum = 64, len(pieces)
    data = bytearray(64 + 56 * phnum)
    # (name, type, flags, address, contents, link, info, alignment, entry size)
    sections: list[tuple[str, int, int, int, bytes, int, int, int, int]] = [
        (piece.name, 1, _SHF_ALLOC_EXEC, piece.address, piece.code, 0, 0, 4, 0) for piece in pieces
    ]
    symtab_index = len(pieces) + 1
    sections += [
        (".symtab", 2, 0, 0, bytes(symtab), symtab_index + 1, first_global, 8, 24),
        (".strtab", 3, 0, 0, bytes(strtab), 0, 0, 1, 0),
        (".debug_abbrev", 1, 0, 0, abbrev, 0, 0, 1, 0),
        (".debug_info", 1, 0, 0, info, 0, 0, 1, 0),
        (".debug_line", 1, 0, 0, line, 0, 0, 1, 0),
    ]
    names = [string(shstrtab, s[0]) for s in sections]
    shstrtab_name = string(shstrtab, ".shstrtab")
    sections.append((".shstrtab", 3, 0, 0, bytes(shstrtab), 0, 0, 1, 0))
    names.append(shstrtab_name)
    offsets = []
    for sec in sections:
        data += bytes(-len(data) % 8)
        offsets.append(len(data))
        data += sec[4]
    data += bytes(-len(data) % 8)
    shoff = len(data)
    data += bytes(64)  # the null section header
    for sec, name, offset in zip(sections, names, offsets, strict=True):
        _, kind, flags, address, contents, link, sh_info, align, entsize = sec
        data += name.to_bytes(4, "little") + kind.to_bytes(4, "little")
        data += flags.to_bytes(8, "little") + address.to_bytes(8, "little")
        data += offset.to_bytes(8, "little") + len(contents).to_bytes(8, "little")
        data += link.to_bytes(4, "little") + sh_info.to_bytes(4, "little")
        data += align.to_bytes(8, "little") + entsize.to_bytes(8, "little")
    for n, piece in enumerate(pieces):
        at = phoff + 56 * n
        size = len(piece.code)
        data[at : at + 56] = (
            (1).to_bytes(4, "little") + _PF_R_X.to_bytes(4, "little")
            + offsets[n].to_bytes(8, "little") + piece.address.to_bytes(8, "little")
            + piece.address.to_bytes(8, "little") + size.to_bytes(8, "little")
            + size.to_bytes(8, "little") + (4).to_bytes(8, "little")
        )  # fmt: skip
    ident = b"\x7fELF" + bytes((2, 1, 1, 0)) + bytes(8)  # ELFCLASS64, little-endian
    header = ident + (2).to_bytes(2, "little") + (183).to_bytes(2, "little")  # ET_EXEC, AArch64
    header += (1).to_bytes(4, "little") + pieces[0].address.to_bytes(8, "little")
    header += phoff.to_bytes(8, "little") + shoff.to_bytes(8, "little") + bytes(4)
    header += (64).to_bytes(2, "little") + (56).to_bytes(2, "little") + phnum.to_bytes(2, "little")
    header += (64).to_bytes(2, "little") + (len(sections) + 1).to_bytes(2, "little")
    header += len(sections).to_bytes(2, "little")  # .shstrtab is the last section
    data[:64] = header
    return bytes(data)


def program_source(parts: list[tuple[str, Asm]]) -> tuple[str, dict[int, int]]:
    """``program.s``: the assembly source of the program, and the line of each address."""
    lines = ["// etm_demo: the program of the example (made by examples/make_examples.py)"]
    where: dict[int, int] = {}
    for title, asm in parts:
        lines += ["", f"// {title}"]
        names = {a: n for n, a in asm.labels.items()}
        for pc, text, _, comment in asm.items:
            if pc in names:
                lines.append(f"{names[pc]}:")
            where[pc] = len(lines) + 1
            line = f"        {text:<24}" + (f"// {comment}" if comment else "")
            lines.append(line.rstrip())
    return "\n".join(lines) + "\n", where


def _ini(section: str, items: dict[str, str]) -> str:
    return f"[{section}]\n" + "".join(f"{k}={v}\n" for k, v in items.items())


def etm_demo(root: Path) -> None:
    """The ETMv4 + STM example: see the module docstring."""
    user, kernel = user_program(), kernel_handler()
    user_code, kernel_code = user.code(), kernel.code()
    steps = run_program([(USER_BASE, user_code), (EL0_SYNC, kernel_code)], USER_BASE)

    # Interleave the two sources in the order they produced their bytes: at the
    # same step, the ETM's packets (about earlier instructions) go first.
    pieces = [(n, 0, ETM_TRACE_ID, data) for n, data in etm_trace(steps)]
    pieces += [(n, 1, STM_TRACE_ID, data) for n, data in stm_trace(steps)]
    frames = format_frames((tid, data) for _, _, tid, data in sorted(pieces))

    cpu = _ini("device", {"name": "cpu_0", "class": "core", "type": "Cortex-A53"}) + "\n"
    cpu += _ini(
        "regs", {"PC(size:64)": f"{USER_BASE:#018x}", "VBAR_EL1(size:64)": f"{VBAR_EL1:#018x}"}
    )
    for n, (fname, base, code) in enumerate(
        (("user.bin", USER_BASE, user_code), ("kernel.bin", EL0_SYNC, kernel_code)), 1
    ):
        cpu += "\n" + _ini(
            f"dump{n}",
            {"file": fname, "address": f"{base:#x}", "length": f"{len(code):#x}", "space": "EL1N"},
        )
    # ETMv4.0 on a Cortex-A53 (IHI0064 chapter 7):
    # TRCCONFIGR: bit 0 RES1, CID (bit 6) and TS (bit 11) on; no cycle counts,
    #   branch broadcast, return stack, VMID or Q elements.
    # TRCIDR0 0x28000EA1: COMMOPT=1, TSSIZE=64 bits, 4 events, RETSTACK, CCI,
    #   TRCBB; no data trace, no conditional trace, no Q elements.
    # TRCIDR1 0x4100F403: ETMv4.0, designer Arm. TRCIDR2 0x00000488: 64-bit
    #   instruction addresses, 32-bit context ID, 8-bit VMID, 12-bit cycle counts.
    # TRCIDR8 = 0: no speculation, every P0 element is committed when traced.
    etm_regs = {
        "TRCCONFIGR(0x004)": "0x00000841",
        "TRCTRACEIDR(0x010)": f"{ETM_TRACE_ID:#010x}",
        "TRCAUTHSTATUS(0x3EE)": "0x000000CC",
        "TRCIDR0(0x078)": "0x28000EA1",
        "TRCIDR1(0x079)": "0x4100F403",
        "TRCIDR2(0x07A)": "0x00000488",
        "TRCIDR8(0x060)": "0x00000000",
        "TRCIDR9(0x061)": "0x00000000",
        "TRCIDR10(0x062)": "0x00000000",
        "TRCIDR11(0x063)": "0x00000000",
        "TRCIDR12(0x064)": "0x00000000",
        "TRCIDR13(0x065)": "0x00000000",
    }
    etm_ini = _ini("device", {"name": "ETM_0", "class": "trace_source", "type": "ETM4"})
    etm_ini += "\n" + _ini("regs", etm_regs)
    # STMTCSR: TRACEID in bits [22:16], EN, TSEN and SYNCEN set.
    stm_ini = _ini("device", {"name": "STM_0", "class": "trace_source", "type": "STM"})
    stm_ini += "\n" + _ini("regs", {"STMTCSR(0x3A0)": f"{0x00000007 | STM_TRACE_ID << 16:#010x}"})

    listing = ["; etm_demo: the program in the memory dumps (made by examples/make_examples.py)"]
    listing += ["; user.bin (EL0)", *user.listing(), "; kernel.bin (EL1, VBAR_EL1 + 0x400)"]
    listing += kernel.listing()
    write_snapshot(
        root,
        "cstrace example: A64 program traced by an ETMv4 and an STM into one ETB",
        {"cpu_0.ini": cpu, "ETM_0.ini": etm_ini, "STM_0.ini": stm_ini},
        [("ETB_0", "etb_0.bin", frames, "coresight")],
        {"ETM_0": "ETB_0", "STM_0": "ETB_0"},
        {"cpu_0": "ETM_0"},
        {
            "user.bin": user_code,
            "kernel.bin": kernel_code,
            "program.txt": "\n".join(listing).encode() + b"\n",
            **program_files(user, kernel),
        },
    )


# The functions of the program: (name, first label, label after its end or None: the end).
FUNCTIONS = (("_start", "_start", "square"), ("square", "square", None))
HANDLERS = (("el0_sync", "el0_sync", "panic"), ("panic", "panic", None))


def program_files(user: Asm, kernel: Asm) -> dict[str, bytes]:
    """``program.s`` and ``program.elf``: the program's source and its ELF file with DWARF."""
    source, where = program_source(
        [
            ("user program (EL0), at 0x400000", user),
            ("kernel handler (EL1), VBAR_EL1 + 0x400", kernel),
        ]
    )
    functions = []
    for asm, table in ((user, FUNCTIONS), (kernel, HANDLERS)):
        for name, first, after in table:
            start = asm.labels[first]
            end = asm.pc if after is None else asm.labels[after]
            functions.append((name, start, end - start, where[start] - 1))  # its label
    pieces = [
        Piece(".text", user.base, user.code(), [where[pc] for pc, *_ in user.items]),
        Piece(".text.kernel", kernel.base, kernel.code(), [where[pc] for pc, *_ in kernel.items]),
    ]
    return {"program.s": source.encode(), "program.elf": elf_image(pieces, functions, "program.s")}


EXAMPLES: dict[str, Callable[[Path], None]] = {"stm_demo": stm_demo, "etm_demo": etm_demo}


def main() -> None:
    """Regenerate every example."""
    for name, make in EXAMPLES.items():
        make(HERE / name)
        print(f"wrote {HERE / name}")


if __name__ == "__main__":
    main()
