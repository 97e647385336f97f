"""Corpus listings do not depend on the size of the capture blocks read lazily.

Sessions demultiplex ETB/ETR and single-source buffers block by block (1 MiB),
and the readers carry packets and state across blocks. Here the corpus captures
are decoded with blocks of a few frames (so that blocks cut packets, A-syncs
and the reference's 1024-byte reads everywhere) and the listing must be the
same, line for line, as with the default block size. Captures of ETMv4/ETE
(formatted and unformatted), PTM and ETMv3 (with ITM) are covered.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from cstrace.capture.lazy import LazyStream
from tests.golden.corpus import listing

NAMES = (
    "juno_r1_1",  # ETMv4, ETR
    "a57_single_step",  # ETMv4, TMC FIFO
    "ete_spec_1",  # ETE, unformatted
    "ss_ib_el1ns@multi_session",  # ETE, unformatted, several buffers
    "Snowball",  # PTM
    "TC2",  # PTM, ETMv3, ITM
    "trace_cov_a15",  # PTM, unformatted
)


@pytest.mark.parametrize("block", [48, 1024 + 16 * 7])
@pytest.mark.parametrize("name", NAMES)
def test_listing_same_with_small_blocks(
    corpus: Path, name: str, block: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    expected = listing(corpus, name)
    defaults = LazyStream.__init__.__kwdefaults__
    assert defaults is not None and "block_size" in defaults
    monkeypatch.setitem(defaults, "block_size", block)
    assert listing(corpus, name) == expected
