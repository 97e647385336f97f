"""Decode my dump: every corpus buffer as a raw capture with only its memory dumps.

No registers, no core type, no protocol, no capture format: configuration
inference (``cstrace.inputs.infer``) must find settings under which the buffer
decodes to the reference's elements, scored with the rules of ``ocsd_score.py``.

What cannot be told from a raw capture in principle (docs/usage.md, "Decode your
own dump") is taken out of the comparison, and only that:

- a trace ID that put no byte in the capture: the snapshot configures a decoder
  for it and the reference prints its end-of-trace element, but nothing in the
  bytes says the source exists;
- the trace ID of a single-source capture, which its data does not carry: the
  one item given (``--trace-id``, as a user would).

``infrastructure`` describes ETMv4 trace as ETE, and the reference decodes it
with that mistaken configuration (bad packets, resynchronisations); inference
finds the consistent ETMv4 configuration instead, so that listing keeps at
least 99% of its elements and is not required to be exact.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest

from cstrace.inputs import detect_capture
from tests.conftest import corpus_dir
from tests.golden.corpus import expected_names
from tests.golden.raw_corpus import RawCase, expected_listing, raw_case, raw_listing
from tests.golden.scoring import score, split
from tests.marks import corpus_params

_CORPUS = corpus_dir()
_NAMES = (
    [
        n
        for n in expected_names(_CORPUS)
        if not n.endswith("@multi_session") and not n.endswith("@src_addr_n")
    ]
    if _CORPUS
    else ["corpus-absent"]
)
MISDESCRIBED = {"infrastructure"}


def _without_silent_ids(lines: list[str], silent: set[str]) -> list[str]:
    """``lines`` without the element lines of trace IDs that have no byte in the capture."""
    return [ln for ln in lines if not any(f"; ID:{t};" in ln for t in silent)]


@pytest.mark.parametrize("name", corpus_params(_NAMES))
def test_raw_buffer_decodes_with_inferred_configuration(name: str) -> None:
    if _CORPUS is None:
        pytest.skip(
            "reference corpus not found: set CSTRACE_CORPUS or place it at ../shared/corpus"
        )
    with tempfile.TemporaryDirectory() as tmp:
        case = raw_case(_CORPUS, name, Path(tmp))
        guess = detect_capture(case.capture.read_bytes(), None)
        actual = raw_listing(case)
    expected = expected_listing(_CORPUS, name)
    full = score(expected, actual)
    present = {f"{g.trace_id:x}" for g in guess.streams if g.trace_id is not None and g.size}
    exp_elems, _ = split(expected)
    silent = set()
    if guess.format != "source_data":
        silent = {t for t in exp_elems if t not in present}
    got = score(_without_silent_ids(expected, silent), actual)
    print(f"{name}: {full.summary()} (without IDs with no data {sorted(silent)}: {got.summary()})")
    # Whatever the capture, at least 99% of the reference's elements are kept.
    assert full.elem_kept >= 0.99 * full.elem_exp, full.summary()
    if name in MISDESCRIBED:
        return
    assert got.exact, f"{got.summary()}\n{got.first_diff}"


@pytest.mark.parametrize("name", corpus_params(_NAMES))
def test_raw_buffer_without_code_keeps_every_packet(name: str) -> None:
    """With no memory at all, inference works at packet level: every packet is read as
    the reference reads it (elements then stop where code is needed)."""
    if _CORPUS is None:
        pytest.skip(
            "reference corpus not found: set CSTRACE_CORPUS or place it at ../shared/corpus"
        )
    with tempfile.TemporaryDirectory() as tmp:
        case = raw_case(_CORPUS, name, Path(tmp))
        case = RawCase(case.name, case.capture, [], case.trace_id)
        actual = raw_listing(case)
    got = score(expected_listing(_CORPUS, name), actual)
    print(f"{name} without code: {got.summary()}")
    if name in MISDESCRIBED:
        assert got.pkt_kept >= 0.99 * got.pkt_exp, got.summary()
        return
    assert got.pkt_kept == got.pkt_exp and got.pkt_extra == 0, got.summary()
