"""Conformance: every corpus listing is decoded and scored against the reference output.

Listings named in ``EXACT`` must match the reference exactly (elements, and all
expected packet lines kept); a regression fails. The others are decoded too: they
must not raise, and their score is reported. A listing that becomes exact without
being in ``EXACT`` fails as well, so that the list is kept up to date.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import corpus_dir
from tests.golden.corpus import expected_names, listing
from tests.golden.scoring import read_listing, score

# Listings that must be exact today.
EXACT: set[str] = set()
EXACT |= {"Snowball", "trace_cov_a15"}  # PTM
EXACT |= {"TC2"}  # PTM, ETMv3 and ITM together
EXACT |= {"stm_only", "stm-issue-27", "itm_only_csformat"}  # STM, ITM
EXACT |= {"stm_only-juno"}  # STM, ends where the reference's deformatter gives up
EXACT |= {  # ETMv4
    "a55-test-tpiu",
    "a57_single_step",
    "armv8_1m_branches",
    "bugfix-exact-match",
    "init-short-addr",
    "juno-ret-stck",
    "juno-uname-001",
    "juno_r1_1",
}
EXACT |= {  # ETE
    "001-ack_test",
    "ete-bc-instr",
    "ete-ite-instr",
    "ete-ite-instr@multi_session",
    "ete-wfet",
    "ete_ip",
    "ete_ip@src_addr_n",
    "ete_mem",
    "ete_spec_1",
    "ete_spec_2",
    "event_test",
    "feat_cmpbr",
    "infrastructure",
    "maxspec0_commopt1",
    "pauth_lr",
    "pauth_lr@multi_session",
    "q_elem",
    "q_elem@multi_session",
    "s_9001",
    "s_9001@multi_session",
    "src_addr",
    "src_addr@src_addr_n",
    "ss_ib_el1ns",
    "ss_ib_el1ns@multi_session",
    "tme_simple",
    "tme_test",
    "trace_file_vmid",
    "ts_bit64_set",
    "ts_marker",
}

_CORPUS = corpus_dir()
NAMES = expected_names(_CORPUS) if _CORPUS is not None else ["<corpus absent>"]


@pytest.mark.corpus
@pytest.mark.parametrize("name", NAMES)
def test_corpus_listing(corpus: Path, name: str) -> None:
    actual = listing(corpus, name)
    expected = read_listing(corpus / "expected" / f"{name}.ppl.xz")
    s = score(expected, actual)
    if name in EXACT:
        assert s.exact and s.packets_complete, f"{name}: {s.summary()}\n{s.first_diff}"
    else:
        assert not (s.exact and s.packets_complete and s.elem_exp > 0), (
            f"{name} is now exact ({s.summary()}): add it to EXACT"
        )
