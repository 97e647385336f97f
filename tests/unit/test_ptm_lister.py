"""The PTM reader and decoder against the installed reference lister, on crafted trace.

When OpenCSD's ``trc_pkt_lister`` is installed (an older release than the
corpus's), random PTM streams over a random program are written into a
one-source snapshot folder and listed by both; every packet and element line
must agree, apart from what the newer reference prints differently:

- ``ADDR_NACC`` elements name the memory space (``; Memspace [0x19:Any S]``);
- the VMID packet text (the old one prints the VMID byte as a character);
- decoder messages name the decoder after the trace ID (``DCD_PTM_0016``);
- the ``END OF TRACE DATA`` line (not a listing line the corpus scores).

Skipped when the lister is absent.
"""

from __future__ import annotations

import random
import re
import shutil
import struct
import subprocess
from pathlib import Path

import pytest

from cstrace.decode import Session
from cstrace.elements import Isa
from cstrace.inputs import read_snapshot
from cstrace.protocols.ptm.encoder import (
    encode_async,
    encode_atom_ca,
    encode_atoms,
    encode_branch,
    encode_context_id,
    encode_exception_return,
    encode_ignore,
    encode_isync,
    encode_timestamp,
    encode_trigger,
    encode_vmid,
    encode_waypoint_update,
)
from cstrace.protocols.ptm.packets import ISyncReason
from cstrace.render.ocsd import listing_lines

LISTER = shutil.which("trc_pkt_lister")
pytestmark = pytest.mark.skipif(LISTER is None, reason="trc_pkt_lister is not installed")

A32_BASE = 0x8000
T32_BASE = 0x9000
WORDS = 256


def a32_program(rng: random.Random) -> bytes:
    """Random A32 code: plain instructions, direct and indirect branches, barriers."""
    out = []
    for i in range(WORDS):
        k = rng.random()
        off = (rng.randrange(WORDS) - i - 2) & 0xFFFFFF
        if k < 0.55:
            w = rng.choice([0xE1A00000, 0xE2800001, 0xE3500005, 0xE5910000])
        elif k < 0.65:
            w = 0xEA000000 | off  # b
        elif k < 0.72:
            w = 0xEB000000 | off  # bl
        elif k < 0.82:
            w = 0x0A000000 | off  # beq
        elif k < 0.86:
            w = 0xE12FFF1E  # bx lr
        elif k < 0.89:
            w = 0xE12FFF33  # blx r3
        elif k < 0.92:
            w = 0xE8BD8000  # pop {pc}
        elif k < 0.95:
            w = 0xF57FF05F  # dmb
        elif k < 0.97:
            w = 0xFA000000 | off  # blx (to Thumb)
        else:
            w = 0xEF000000  # svc
        out.append(w)
    return struct.pack(f"<{WORDS}I", *out)


def t32_program(rng: random.Random) -> bytes:
    """Random T32 code: 16- and 32-bit instructions and branches."""
    out: list[int] = []
    while len(out) < 2 * WORDS:
        k = rng.random()
        if k < 0.5:
            out.append(rng.choice([0xBF00, 0x3001, 0x2805, 0x6808]))
        elif k < 0.6:
            out.append(0xE000 | rng.randrange(0x800))  # b.n
        elif k < 0.7:
            out.append(0xD000 | (rng.randrange(14) << 8) | rng.randrange(256))  # b<c>.n
        elif k < 0.75:
            out.append(0x4770)  # bx lr
        elif k < 0.78:
            out.append(0x4798)  # blx r3
        elif k < 0.82:
            out.append(0xBD00)  # pop {pc}
        elif k < 0.86:
            out.append(0xB100 | rng.randrange(256))  # cbz
        elif k < 0.93:
            out += [0xF000 | rng.randrange(0x400), 0xF800 | rng.randrange(0x800)]  # bl
        else:
            out += [0xF3BF, 0x8F5F]  # dmb
    return struct.pack(f"<{2 * WORDS}H", *out[: 2 * WORDS])


def stream(rng: random.Random, ca: bool, ctxt: int, ts64: bool) -> bytes:
    """Random trace over the two programs (and some addresses outside them)."""

    def address(isa: Isa) -> int:
        if rng.random() < 0.05:
            return rng.randrange(1 << 32) & ~3
        if isa == Isa.A32:
            return A32_BASE + 4 * rng.randrange(WORDS)
        return T32_BASE + 2 * rng.randrange(2 * WORDS)

    def cc() -> int:
        return rng.choice([0, 1, 7, 300, rng.randrange(1 << 24)])

    out = bytearray(rng.randrange(1, 256) for _ in range(rng.randrange(0, 40)))
    out += encode_async()
    isa = rng.choice([Isa.A32, Isa.T32])
    out += encode_isync(
        address(isa), isa, ISyncReason.TRACE_ON, cycle_count=cc() if ca else None,
        context_id=rng.randrange(256), ctxt_id_bytes=ctxt,
    )  # fmt: skip
    for _ in range(rng.randrange(10, 150)):
        k = rng.random()
        if k < 0.45:
            if ca:
                out += encode_atom_ca(rng.random() < 0.6, cc())
            else:
                out += encode_atoms([rng.random() < 0.6 for _ in range(rng.randint(1, 5))])
        elif k < 0.65:
            isa = rng.choice([Isa.A32, Isa.T32, Isa.A32, Isa.T32, Isa.JAZELLE])
            exc = rng.randrange(0x200) if rng.random() < 0.1 else None
            out += encode_branch(
                address(isa), isa, 5 if rng.random() < 0.5 else rng.randint(2, 4),
                exception=exc, ns=rng.random() < 0.5, cycle_count=cc() if ca else None,
            )  # fmt: skip
        elif k < 0.70:
            reason = rng.choice(list(ISyncReason))
            isa = rng.choice([Isa.A32, Isa.T32, Isa.TEE])
            out += encode_isync(
                address(isa), isa, reason, ns=rng.random() < 0.3,
                cycle_count=cc() if ca and reason else None,
                context_id=rng.randrange(4), ctxt_id_bytes=ctxt,
            )  # fmt: skip
        elif k < 0.75:
            isa = rng.choice([Isa.A32, Isa.T32])
            out += encode_waypoint_update(address(isa), isa, rng.randint(1, 5))
        elif k < 0.80:
            out += encode_timestamp(
                rng.getrandbits(60), ts_64bit=ts64, nbytes=rng.randint(1, 9 if ts64 else 7),
                cycle_count=cc() if ca else None,
            )  # fmt: skip
        elif k < 0.86:
            out += encode_context_id(rng.randrange(4), ctxt) + encode_vmid(rng.randrange(3))
        elif k < 0.90:
            out += rng.choice([encode_trigger(), encode_exception_return(), encode_ignore()])
        elif k < 0.92:
            out += encode_async(rng.randrange(3))
        elif k < 0.93:
            out += bytes([rng.choice([0x02, 0x04, 0x7E]), 0, 0, 1])  # reserved, bad A-sync
        else:
            out += encode_atom_ca(True, cc()) if ca else encode_atoms([True])
    if rng.random() < 0.2:
        del out[rng.randrange(len(out)) :]
    return bytes(out)


def write_snapshot(folder: Path, trace: bytes, etmcr: int, ccer: int, rng: random.Random) -> None:
    """A one-core, one-PTM snapshot with the trace as unformatted source data."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "a32.bin").write_bytes(a32_program(rng))
    (folder / "t32.bin").write_bytes(t32_program(rng))
    (folder / "trace.bin").write_bytes(trace)
    (folder / "cpu.ini").write_text(
        "[device]\nname=cpu_0\nclass=core\ntype=Cortex-A15\n\n[regs]\nR15=0\n\n"
        f"[dump1]\nfile=a32.bin\naddress=0x{A32_BASE:X}\nlength=0x{4 * WORDS:X}\n\n"
        f"[dump2]\nfile=t32.bin\naddress=0x{T32_BASE:X}\nlength=0x{4 * WORDS:X}\n"
    )
    (folder / "ptm.ini").write_text(
        "[device]\nname=PTM_0\nclass=trace_source\ntype=PTM1.1\n\n[regs]\n"
        f"ETMCR(0x000)=0x{etmcr:08X}\nETMIDR(0x079)=0x411CF312\n"
        f"ETMCCER(0x07A)=0x{ccer:08X}\nETMTRACEIDR(0x080)=0x00000010\n"
    )
    (folder / "snapshot.ini").write_text(
        "[snapshot]\nversion=1.0\n\n[device_list]\ndevice0=cpu.ini\ndevice1=ptm.ini\n\n"
        "[trace]\nmetadata=trace.ini\n"
    )
    (folder / "trace.ini").write_text(
        "[trace_buffers]\nbuffers=buffer0\n\n[buffer0]\nname=BUF\nfile=trace.bin\n"
        "format=source_data\n\n[source_buffers]\nPTM_0=BUF\n\n[core_trace_sources]\n"
        "cpu_0=PTM_0\n"
    )


def normalise(lines: list[str]) -> list[str]:
    """Listing lines with the known differences between reference releases removed."""
    out = []
    for line in lines:
        line = re.sub(r"DCD_PTM(_\d+)? :", "DCD_PTM :", line)
        line = re.sub(r"; Memspace \[[^]]*\] \)", " )", line)
        line = re.sub(r"VMID : VM ID packet; VMID=0x.*", "VMID : VM ID packet;", line)
        if "RET_STACK_OVERFLOW" in line:  # fatal: the reference stops listing there
            out.append(line[: line.index("atom packet.") + len("atom packet.")])
            break
        out.append(line)
    return out


def reference(folder: Path) -> list[str]:
    assert LISTER is not None
    proc = subprocess.run(
        [LISTER, "-ss_dir", str(folder), "-decode", "-logstdout"],
        capture_output=True,
        text=True,
        errors="replace",
        check=False,
        timeout=60,
    )
    return [ln for ln in proc.stdout.splitlines() if ln.startswith(("Idx:", "DCD_PTM"))]


def ours(folder: Path) -> list[str]:
    snap = read_snapshot(folder)
    session = Session(snap)
    lines: list[str] = []
    for buf in snap.buffers:
        for run in session.open_buffer(buf).runs:
            lines.extend(listing_lines(run))
    return [ln for ln in lines if ln.startswith(("Idx:", "DCD_PTM"))]


@pytest.mark.parametrize("seed", range(24))
def test_listing_matches_the_reference_lister(seed: int, tmp_path: Path) -> None:
    rng = random.Random(seed)
    ca = rng.random() < 0.5
    ctxt = rng.choice([0, 1, 2, 4])
    ts64 = rng.random() < 0.5
    etmcr = (ca << 12) | ({0: 0, 1: 1, 2: 2, 4: 3}[ctxt] << 14) | (1 << 28)
    etmcr |= (rng.random() < 0.5) << 29  # return stack
    etmcr |= (rng.random() < 0.3) << 8  # branch broadcast
    ccer = (1 << 22) | (1 << 23) | (1 << 28) | (ts64 << 29) | ((rng.random() < 0.3) << 24)
    trace = stream(rng, ca, ctxt, ts64)
    write_snapshot(tmp_path, trace, etmcr, ccer, rng)
    expected = normalise(reference(tmp_path))
    actual = normalise(ours(tmp_path))
    assert actual == expected
