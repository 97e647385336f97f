"""Decode my dump from any board: captures of the kinds real boards give, with the ELF alone.

Each capture is made with the project's encoders from a program run in an
emulator (:mod:`tests.integration.boards`): a Cortex-R5 traced by an ETMv3.3
with and without cycle-accurate tracing (ETB), a Cortex-M33 traced by an
ETMv4.2 with M-profile exceptions (a single-source DMA buffer, then zeros), an
AArch64 program run as two processes traced by an ETMv4 with an 8-bit and a
32-bit VMID (ETR), and a Cortex-M3 SWO capture (ETMv3.4 and ITM without any
sync packet, through the TPIU formatter, with a few bytes damaged on the line).

The bar, per capture, is "right, or honest": decoded with only the bytes and
the ELF (``cstrace decode CAPTURE --image ELF@ADDRESS``), at least 99% of the
elements of its decode with the true configuration (scored as the corpus is,
``tests/golden/scoring.py``); or else the configuration note names what it
could not decide and claims a confidence under 0.9. The labels name the
architecture only as far as the inputs prove it.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys

import pytest

from tests.golden.scoring import score
from tests.integration import boards as B

pytestmark = pytest.mark.skipif(
    shutil.which(B.ARM_CC) is None, reason=f"{B.ARM_CC} not installed (Debian: gcc-arm-none-eabi)"
)


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "cstrace.cli", *args], capture_output=True, text=True, check=False
    )


def _listing(b: B.BoardCapture, *options: str) -> tuple[list[str], str]:
    done = _cli("decode", str(b.capture), *b.image_options(), *options, "--format=ocsd",
                "--no-summary")  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    tid = f"ID:{b.trace_id:x};"
    return [ln for ln in done.stdout.splitlines() if tid in ln], done.stderr


def _confidence(note: str) -> float:
    m = re.search(r"\(inferred, confidence ([0-9.]+)\)", note)
    assert m, note
    return float(m.group(1))


_TRUE: dict[str, list[str]] = {}


def right_or_honest(b: B.BoardCapture, *options: str) -> tuple[float, float, str]:
    """Decode ``b`` with its true configuration and with only its bytes and ELF (plus
    ``options``): (share of the true elements kept, confidence claimed, notes)."""
    key = str(b.capture)
    if key not in _TRUE:
        _TRUE[key] = _listing(b, *b.true_options())[0]
    expected = _TRUE[key]
    actual, notes = _listing(b, *options)
    got = score(expected, actual)
    share = got.elem_kept / got.elem_exp
    conf = _confidence(notes)
    print(f"{b.capture.name} {' '.join(options)}: {got.summary()}, confidence {conf}")
    if share < 0.99:
        assert conf < 0.9, f"{got.summary()}: wrong at confidence {conf}\n{notes}"
        assert "undecided:" in notes, notes
    return share, conf, notes


def _info(b: B.BoardCapture, *options: str) -> str:
    done = _cli("info", str(b.capture), *b.image_options(), *options, "--no-decode")
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    return done.stdout


# -- Cortex-R5, ETMv3.3 through an ETB ----------------------------------------------------


# The quick run takes one capture of each board (python -m tests); the second of the R5 and
# of the server, which make the same checks on another setting, are in the slow group (CI).
@pytest.fixture(
    scope="module",
    params=[False, pytest.param(True, marks=pytest.mark.slow)],
    ids=["no-cc", "cycle-accurate"],
)
def r5(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> B.BoardCapture:
    B.compilers_or_skip(B.ARM_CC)
    return B.r5_etmv3(tmp_path_factory.mktemp("r5"), request.param)


def test_r5_etmv3_from_the_bytes_and_the_elf(r5: B.BoardCapture) -> None:
    share, conf, notes = right_or_honest(r5)
    assert share >= 0.99 and conf >= 0.9, notes
    ca = "1" if r5.registers["ETMCR"] & 0x1000 else "0"
    assert f"cyclecount={ca}" in notes
    assert "ETMv3 (minor version not seen) on an Armv7-R core" in notes
    if ca == "0":
        info = _info(r5)
        assert "configuration inferred (confidence 0.99): ETMv3" in info
        assert "does not matter (other values decode the same): " in info
        assert "PTM" not in info.split("configuration inferred")[1]


def test_r5_etmv3_told_protocol_core_and_context_id(r5: B.BoardCapture) -> None:
    """The options the issue's user gave: the cycle-count setting is still the trace's."""
    tid = f"{r5.trace_id:#x}"
    share, _conf, notes = right_or_honest(
        r5, f"--protocol={tid}=etmv3", f"--core={tid}=Cortex-R5", f"--set={tid}:context_id=0"
    )
    assert share >= 0.99, notes
    ca = "1" if r5.registers["ETMCR"] & 0x1000 else "0"
    assert f"cyclecount={ca}" in notes and "Cortex-R5 (Armv7-R)" in notes


# -- Cortex-M33, ETMv4.2 single source --------------------------------------------------


@pytest.fixture(scope="module")
def m33(tmp_path_factory: pytest.TempPathFactory) -> B.BoardCapture:
    B.compilers_or_skip(B.ARM_CC)
    return B.m33_etmv4(tmp_path_factory.mktemp("m33"))


def test_m33_etmv4_single_source_from_the_bytes_and_the_elf(m33: B.BoardCapture) -> None:
    share, _conf, notes = right_or_honest(m33)
    assert share >= 0.99
    assert "ETE" not in notes.split("(decoded as")[0]
    assert "ETMv4 (minor version not seen) on an Armv8-M Mainline core" in notes


def test_m33_with_the_core_named_is_never_ete(m33: B.BoardCapture) -> None:
    share, _conf, notes = right_or_honest(m33, "--core=Cortex-M33")
    assert share >= 0.99
    assert "ETE" not in notes.split("(decoded as")[0]
    assert "on Cortex-M33 (Armv8-M)" in notes and "decoded as ETM4" in notes


# -- an Armv8-A server: ETMv4, two processes, 8- and 32-bit VMIDs ------------------------


@pytest.fixture(
    scope="module", params=[8, pytest.param(32, marks=pytest.mark.slow)], ids=["vmid8", "vmid32"]
)
def server(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> B.BoardCapture:
    B.compilers_or_skip(B.A64_CC)
    return B.server_etmv4(tmp_path_factory.mktemp("server"), request.param)


def test_server_etmv4_from_the_bytes_and_the_elf(server: B.BoardCapture) -> None:
    share, conf, notes = right_or_honest(server)
    assert share >= 0.99 and conf >= 0.9, notes
    bits = 8 if server.registers["TRCIDR2"] >> 10 & 0x1F == 1 else 32
    assert f"vmid={bits}" in notes
    label = notes.split("(decoded as")[0]
    assert "ETMv4" in label and "on an Armv8-A or later core" in label
    assert "ETE on" not in label


def test_server_told_etmv4(server: B.BoardCapture) -> None:
    tid = f"{server.trace_id:#x}"
    share, conf, notes = right_or_honest(server, f"--protocol={tid}=etmv4")
    assert share >= 0.99 and conf >= 0.9, notes


# -- Cortex-M3 SWO: ETMv3.4 and ITM without sync, bytes damaged on the line -------------

SWO_FAULTS = (
    (500, "drop"), (1200, "flip"), (1900, "insert"), (2700, "drop"),
    (3400, "flip"), (4200, "insert"), (5000, "drop"),
)  # fmt: skip


@pytest.fixture(scope="module")
def swo(tmp_path_factory: pytest.TempPathFactory) -> B.BoardCapture:
    B.compilers_or_skip(B.ARM_CC)
    return B.m3_swo(tmp_path_factory.mktemp("swo"), faults=SWO_FAULTS)


def _itm_items(rows: list[dict[str, object]]) -> list[tuple[str, int, int]]:
    out: list[tuple[str, int, int]] = []
    for r in rows:
        if r.get("id") != 1 or r.get("type") != "ITMTRACE":
            continue
        kind, src = str(r["pkt_type"]), int(str(r["src_id"]))
        if kind == "SWIT":
            values = r["payloads"] if "payloads" in r else [r["value"]]
            out += [("SWIT", src, int(str(v))) for v in values]  # type: ignore[union-attr]
        elif kind == "DWT":
            out.append(("DWT", src, int(str(r["value"]))))
        elif kind.startswith("TS_"):
            out.append(("TS", 0, int(str(r["value"]))))
    return out


def test_swo_etm_from_the_bytes_and_the_elf(swo: B.BoardCapture) -> None:
    share, conf, notes = right_or_honest(swo)
    assert share >= 0.99 and conf >= 0.9, notes
    assert "on an Armv7-M core" in notes


def test_swo_itm_without_sync_recovers_all_but_a_handful(swo: B.BoardCapture) -> None:
    import difflib

    done = _cli("decode", str(swo.capture), *swo.image_options(), "--format=jsonl", "--no-summary")
    assert done.returncode == 0, done.stderr
    got = _itm_items([json.loads(ln) for ln in done.stdout.splitlines()])
    want = [(i.kind, i.src, i.value) for i in swo.itm_items if i.kind != "OVERFLOW"]
    sm = difflib.SequenceMatcher(None, want, got, autojunk=False)
    kept = sum(m.size for m in sm.get_matching_blocks())
    print(f"ITM items recovered: {kept} of {len(want)} ({len(SWO_FAULTS)} damaged bytes)")
    # A damaged byte costs about the packet it hit; two per fault at most.
    assert kept >= len(want) - 2 * len(SWO_FAULTS)
    assert len(got) - kept <= 2 * len(SWO_FAULTS)
