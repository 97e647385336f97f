"""The ETMv4/ETE reader against the installed reference lister, on crafted streams.

When OpenCSD's ``trc_pkt_lister`` is installed (an older release than the
corpus's, but with the same packet reader), each stream is written into a
one-source snapshot folder and listed by both; packet boundaries, capture
indices and mnemonics must agree. Skipped when the lister is absent.

Two listing modes are used, because the old lister's modes each hide
something: with ``-decode`` every unsynchronised piece is listed with its raw
bytes (used for random bytes), but the run stops if the decoder gives up; the
packet-only mode lists every packet of a synchronised stream (used for
well-formed streams with noise) without raw bytes and with only the first
unsynchronised piece.
"""

from __future__ import annotations

import random
import shutil
import subprocess
from pathlib import Path

import pytest

from cstrace.bits import hexbytes
from cstrace.capture.stream import Stream
from cstrace.protocols.etmv4 import encoder as enc
from cstrace.protocols.etmv4.config import Etmv4Config
from cstrace.protocols.etmv4.reader import iter_packets
from cstrace.render.ocsd.etmv4 import packet_text_for

LISTER = shutil.which("trc_pkt_lister")
pytestmark = pytest.mark.skipif(LISTER is None, reason="trc_pkt_lister is not installed")

# (registers, device type, core, ETE): configurations the old lister also decodes
VARIANTS = {
    "etm4": (
        dict(TRCCONFIGR=0xC1, TRCTRACEIDR=0x10, TRCIDR0=0x28000EA1, TRCIDR1=0x4100F403,
             TRCIDR2=0x488, TRCIDR8=0),
        "ETM4", "Cortex-A57", False,
    ),
    "etm4-cond-q": (
        dict(TRCCONFIGR=0x67C7 | 0x30000, TRCTRACEIDR=0x10, TRCIDR0=0x280DCEFF,
             TRCIDR1=0x4100F443, TRCIDR2=0x20001088, TRCIDR8=4),
        "ETM4", "Cortex-A57", False,
    ),
    "ete": (
        dict(TRCCONFIGR=0x80C1, TRCTRACEIDR=0x10, TRCIDR0=0x28C1CEA1, TRCIDR1=0x4100FFF0,
             TRCIDR2=0xD0001088, TRCIDR8=0, TRCDEVARCH=0x47705A13),
        "ETE", "ARM-AA64", True,
    ),
    "m33": (
        dict(TRCCONFIGR=0x1, TRCTRACEIDR=0x0, TRCIDR0=0x280006E1, TRCIDR1=0x4100F454,
             TRCIDR2=0x4, TRCIDR8=0),
        "ETM4", "Cortex-M33", False,
    ),
}  # fmt: skip


# Packet-only listings show only the first unsynchronised piece (listed as I_NOT_SYNC
# or, for a 0x00 shed from a long A-sync, I_ASYNC) and no raw bytes to tell them apart.
_HIDDEN = ("I_NOT_SYNC", "I_ASYNC")


def _snapshot(folder: Path, data: bytes, regs: dict[str, int], dev_type: str, core: str) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "trace.bin").write_bytes(data)
    (folder / "snapshot.ini").write_text(
        "[snapshot]\nversion=1.0\n\n[device_list]\ndevice0=cpu.ini\ndevice1=etm.ini\n\n"
        "[trace]\nmetadata=trace.ini\n"
    )
    (folder / "cpu.ini").write_text(f"[device]\nname=cpu_0\nclass=core\ntype={core}\n")
    regs_text = "\n".join(f"{k}={v:#x}" for k, v in regs.items())
    (folder / "etm.ini").write_text(
        f"[device]\nname=ETM_0\nclass=trace_source\ntype={dev_type}\n\n[regs]\n{regs_text}\n"
    )
    (folder / "trace.ini").write_text(
        "[trace_buffers]\nbuffers=buffer0\n\n[buffer0]\nname=BUF\nfile=trace.bin\n"
        "format=source_data\n\n[source_buffers]\nETM_0=BUF\n\n[core_trace_sources]\ncpu_0=ETM_0\n"
    )


def _reference(folder: Path, decode: bool) -> list[str]:
    args = [str(LISTER), "-ss_dir", str(folder), "-logstdout"] + (["-decode"] if decode else [])
    out = subprocess.run(args, capture_output=True, text=True, timeout=60).stdout
    lines = []
    for line in out.splitlines():
        if "Idx:" not in line or "\tI_" not in line:
            continue
        line = line[line.index("Idx:") :]  # error messages may be glued in front
        head, _, tail = line.partition("\t")
        mnemonic = tail.split(" ")[0]
        if not decode and mnemonic in _HIDDEN:
            continue
        lines.append(f"{head.strip()}\t{mnemonic}")
    return lines


def _ours(data: bytes, variant: str, decode: bool) -> list[str]:
    regs, _, core, ete = VARIANTS[variant]
    cfg = Etmv4Config(
        configr=regs["TRCCONFIGR"], traceidr=regs["TRCTRACEIDR"], idr0=regs["TRCIDR0"],
        idr1=regs["TRCIDR1"], idr2=regs["TRCIDR2"], idr8=regs["TRCIDR8"],
        devarch=regs.get("TRCDEVARCH") if ete else None, core_name=core,
    )  # fmt: skip
    text = packet_text_for(ete)
    lines = []
    for p in iter_packets(Stream.from_chunks(None, [(0, data)]), cfg, True):
        mnemonic = text(p).split(" ")[0]
        if decode:
            lines.append(f"Idx:{p.offset}; ID:0; [{hexbytes(p.raw)}];\t{mnemonic}")
        elif mnemonic not in _HIDDEN:
            lines.append(f"Idx:{p.offset}; ID:0;\t{mnemonic}")
    return lines


def _noisy_stream(rnd: random.Random, ete: bool) -> bytes:
    out = bytearray(enc.a_sync() + enc.trace_info(info=rnd.randrange(2), cc_threshold=7))
    addr = enc.AddressEncoder()
    makers = [
        lambda: enc.atom(rnd.choice(["E", "N", "EN", "ENE", "NEEE", "NENEN", "EEEEEEN"])),
        lambda: addr.encode(rnd.randrange(1 << 48) & ~3),
        lambda: addr.encode(rnd.choice([0x1000, 0x1004, 0x2000]), source=ete),
        lambda: enc.context(rnd.randrange(4), rnd.random() < 0.8, True, context_id=5),
        lambda: enc.address_context(rnd.randrange(1 << 40) & ~3, rnd.randrange(2), True),
        lambda: enc.timestamp(rnd.randrange(1 << 64), nbytes=rnd.randrange(1, 10)),
        lambda: enc.exception(rnd.randrange(1 << 10), rnd.randrange(3)),
        lambda: enc.cycle_count_f1(rnd.choice([None, 5]), rnd.choice([None, 3])),
        lambda: enc.cycle_count_f2(rnd.randrange(16), rnd.randrange(1, 17)),
        lambda: enc.commit(rnd.randrange(1, 300)),
        lambda: enc.cancel_f3(rnd.randrange(2, 6), rnd.random() < 0.5),
        lambda: enc.q(rnd.randrange(100), address=rnd.choice([None, 0x1234])),
        lambda: enc.trans_start(),
        lambda: enc.timestamp_marker(),
        lambda: enc.a_sync(),
        lambda: bytes([rnd.randrange(256)]),
    ]
    for _ in range(rnd.randrange(1, 60)):
        out += rnd.choice(makers)()
    return bytes(out)


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_well_formed_streams_with_noise(tmp_path: Path, variant: str) -> None:
    regs, dev_type, core, ete = VARIANTS[variant]
    for case in range(12):
        data = _noisy_stream(random.Random(case * 31 + len(variant)), ete)
        _snapshot(tmp_path, data, regs, dev_type, core)
        assert _ours(data, variant, False) == _reference(tmp_path, False), data.hex()


@pytest.mark.parametrize("variant", ["etm4", "ete", "m33"])
def test_random_and_bit_flipped_bytes(tmp_path: Path, variant: str) -> None:
    regs, dev_type, core, ete = VARIANTS[variant]
    base = _noisy_stream(random.Random(99), ete) * 3
    for case in range(12):
        rnd = random.Random(case)
        if case % 2:
            data = bytes(rnd.randrange(256) for _ in range(rnd.randrange(1, 120)))
        else:
            flipped = bytearray(base[rnd.randrange(40) :])
            for _ in range(4):
                flipped[rnd.randrange(len(flipped))] ^= 1 << rnd.randrange(8)
            data = bytes(b"\x00" * rnd.randrange(14) + b"\x80" + flipped)
        _snapshot(tmp_path, data, regs, dev_type, core)
        reference = _reference(tmp_path, True)
        ours = _ours(data, variant, True)
        # the old lister stops when its decoder gives up: compare what it listed
        assert ours[: len(reference)] == reference, data.hex()
