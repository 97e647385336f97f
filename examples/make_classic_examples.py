"""Build the classic-trace example snapshots in ``examples/classic/`` with cstrace's encoders.

    PYTHONPATH=. python examples/make_classic_examples.py

Needs the test extras (the ``unicorn`` emulator runs the example program, which
is written with the test assembler of ``tests/classic``). Each folder is a
snapshot that ``cstrace decode`` reads: a small ARM/Thumb program (the core's
memory dump), one trace source and one trace buffer in one capture format:

``etmv1_etb``       ETMv1.3, 8-bit port, data addresses and values, an ETB dump (``etm_etb``)
``etmv1_text``      ETMv1.2, 16-bit port, per-cycle text records (``etm_cycles_text``)
``etmv1_demux``     ETMv1.3, 16-bit demultiplexed port, logic-analyser samples (``etm_port``)
``etmv2_cycles``    ETMv2.1, 4-bit port, context IDs, per-cycle records (``etm_cycles``)
``xscale``          an XScale trace buffer, fill-once mode (``xscale_tb``)
``dcc``             DCC trace points and debug messages (``dcc_words``)
"""

from __future__ import annotations

from pathlib import Path

from tests.classic.asm import LR, SP, Asm
from tests.classic.emu import run

from cstrace.capture.etmport import PortMode, pack_cycles
from cstrace.protocols.dcc import MsgType, encode_dcc
from cstrace.protocols.etmv1.config import ClassicEtmConfig, etmcr
from cstrace.protocols.etmv1.encoder import HwModel, encode_etmv1
from cstrace.protocols.etmv2.encoder import encode_etmv2
from cstrace.protocols.xscale.encoder import encode_xscale

HERE = Path(__file__).resolve().parent / "classic"
BASE = 0x8000


def program() -> bytes:
    """ARM code calling a Thumb function that sums a table; a loop around it."""
    a = Asm(BASE)
    a.mov(SP, imm=0x20000)
    a.label("loop")
    a.li(0, BASE + 0x100)  # table
    a.mov(1, imm=4)
    a.ldr_lit(12, "sum_addr")
    a.blx(12)
    a.li(3, BASE + 0x200)
    a.str_(0, 3)
    a.b("loop")
    a.label("sum_addr")
    a.word(0)
    a.thumb = True
    a.align(4)
    a.label("sum")  # r0 = table, r1 = count → r0 = sum
    a.t_movi(2, 0)
    a.label("s_loop")
    a.t_ldst("ldr", 3, 0, 0)
    a.t_add3(2, 2, 3)
    a.t_addi(0, 4)
    a.t_subi(1, 1)
    a.t_bcond("ne", "s_loop")
    a.t_movhi(0, 2)
    a.t_bx(LR)
    code = bytearray(a.code())
    off = a.addr("sum_addr") - BASE
    code[off : off + 4] = (a.addr("sum") | 1).to_bytes(4, "little")
    code += bytes(0x100 - len(code)) + b"".join(i.to_bytes(4, "little") for i in (3, 5, 7, 9))
    return bytes(code)


def write(
    name: str, desc: str, source_ini: str, buffer: bytes, fmt: str, image: bytes | None
) -> None:
    root = HERE / name
    root.mkdir(parents=True, exist_ok=True)
    devices = ["device0=source.ini"]
    cores = ""
    if image is not None:
        devices.append("device1=core.ini")
        (root / "code.bin").write_bytes(image)
        (root / "core.ini").write_text(
            "[device]\nname=core\nclass=core\ntype=ARM926EJ-S\n\n"
            f"[dump]\nfile=code.bin\naddress=0x{BASE:x}\nlength=0x{len(image):x}\n"
        )
        cores = "core=source\n"
    (root / "snapshot.ini").write_text(
        f"[snapshot]\nversion=1.0\ndescription={desc}\n\n[device_list]\n"
        + "\n".join(devices)
        + "\n\n[trace]\nmetadata=trace.ini\n"
    )
    ext = "txt" if fmt == "etm_cycles_text" else "bin"
    (root / f"trace.{ext}").write_bytes(buffer)
    (root / "trace.ini").write_text(
        "[trace_buffers]\nbuffers=buffer0\n\n"
        f"[buffer0]\nname=trace\nfile=trace.{ext}\nformat={fmt}\n\n"
        "[source_buffers]\nsource=trace\n\n"
        f"[core_trace_sources]\n{cores}"
    )
    (root / "source.ini").write_text(source_ini)


def main() -> None:
    image = program()
    r = run(image, BASE, BASE, 160)
    read = r.read
    hw = HwModel(fifo_depth=24, sync_period=200, seed=3)

    def etm(name: str, major: int, minor: int, ctrl: int, fmt: str, desc: str) -> None:
        cfg = ClassicEtmConfig(ctrl, major, minor)
        enc = encode_etmv1 if major == 1 else encode_etmv2
        cycles, _traced = enc(r.execs, cfg, read, hw)
        src = (
            f"[device]\nname=source\nclass=trace_source\ntype=ETM{major}.{minor}\n\n"
            f"[regs]\nETMCR=0x{ctrl:08x}\n"
        )
        write(name, desc, src, pack_cycles(cycles, fmt, cfg.port), fmt, image)

    etm("etmv1_etb", 1, 3, etmcr(width=8, data_value=True, data_addr=True), "etm_etb",
        "ETMv1.3 8-bit port in an ETB, data traced")  # fmt: skip
    etm("etmv1_text", 1, 2, etmcr(width=16), "etm_cycles_text",
        "ETMv1.2 16-bit port, per-cycle text")  # fmt: skip
    etm("etmv1_demux", 1, 3, etmcr(width=16, mode=PortMode.DEMULTIPLEXED), "etm_port",
        "ETMv1.3 16-bit demultiplexed port samples")  # fmt: skip
    etm("etmv2_cycles", 2, 1, etmcr(width=4, ctxid_bytes=1), "etm_cycles",
        "ETMv2.1 4-bit port, per-cycle records")  # fmt: skip
    data, start = encode_xscale(r.execs, read, "fill")
    write(
        "xscale",
        "XScale trace buffer, fill-once",
        f"[device]\nname=source\nclass=trace_source\ntype=XScale\n\n[regs]\nSTART_PC=0x{start:x}\n",
        data,
        "xscale_tb",
        image,
    )
    dcc = encode_dcc(
        [("tp", 1), ("text", "hello from the target"), (MsgType.WORDS, [0xDEADBEEF, 42]), ("tp", 2)]
    )
    write(
        "dcc",
        "DCC software trace",
        "[device]\nname=source\nclass=trace_source\ntype=DCC\n",
        dcc,
        "dcc_words",
        None,
    )


if __name__ == "__main__":
    main()
