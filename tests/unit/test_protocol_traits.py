"""The traits of each protocol's ``ProtocolSpec`` and the registry's lookups by name.

Code outside ``protocols/`` decides through these traits (tests/test_architecture.py
checks it names no protocol), so a wrong trait changes behaviour elsewhere: these
pin what each protocol says about itself.
"""

from __future__ import annotations

from cstrace.protocols import all_protocols, find_protocol, get_protocol, named_protocol


def test_every_protocol_is_listed_once() -> None:
    names = [p.name for p in all_protocols()]
    assert len(names) == len(set(names))
    assert set(names) == {
        "etmv4", "ete", "etmv3", "ptm", "stm", "itm", "etmv1", "etmv2", "xscale", "dcc"
    }  # fmt: skip


def test_software_trace_and_splittable() -> None:
    specs = all_protocols()
    assert {p.name for p in specs if p.software_trace} == {"stm", "itm", "dcc"}
    assert {p.name for p in specs if p.splittable} == {"etmv4", "ete", "ptm", "etmv3"}


def test_names_and_aliases_name_one_protocol_each() -> None:
    seen: dict[str, str] = {}
    for spec in all_protocols():
        for word in (spec.name, *spec.aliases):
            assert word == word.lower()
            assert seen.setdefault(word, spec.name) == spec.name, word
    assert named_protocol(" ETM4 ") is get_protocol("etmv4")
    assert named_protocol("pft") is get_protocol("ptm")
    assert named_protocol("etmv3") is get_protocol("etmv3")
    assert named_protocol("ETM4.2") is None


def test_a_raw_source_type_finds_its_own_protocol() -> None:
    for spec in all_protocols():
        if spec.raw_source_type is not None:
            assert find_protocol(spec.raw_source_type) is spec


def test_command_line_registers() -> None:
    options = {p.name: p.option_registers for p in all_protocols() if p.option_registers}
    assert options == {
        "etmv1": (("etmcr", "ETMCR"),),
        "etmv2": (("etmcr", "ETMCR"),),
        "xscale": (("start_pc", "START_PC"),),
    }
