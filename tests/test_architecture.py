"""The layering of ``src/cstrace``: no import cycles, and the core never imports the containers.

The import graph is built from the source's syntax trees, imports inside
functions included. ``import a.b`` and ``from a import b`` are edges to module
``a.b`` (or to package ``a`` when ``b`` is not a module of it); the implicit
import of parent packages is not an edge, so ``cstrace/__init__.py``, which
re-exports the public API, does not count as imported by every module.

Rules (``../shared/DESIGN.md`` §2):

- no cycles at all;
- ``protocols/``, ``memory/``, ``capture/`` and ``isa/`` import nothing from
  the input adapters (``cstrace.inputs``) and nothing from the layers above
  them (``decode``, ``api``, ``cli``, ``render``);
- nothing below the CLI imports the CLI, and the library never prints;
- nothing outside ``protocols/`` names a protocol: code there asks the
  protocol's ``ProtocolSpec`` (software trace? splittable? which packets does
  the loss report count?) instead of comparing its name with a string.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"
PKG = SRC / "cstrace"

CORE = ("cstrace.protocols", "cstrace.memory", "cstrace.capture", "cstrace.isa")
CONTAINERS = ("cstrace.inputs",)
ABOVE_CORE = (
    "cstrace.decode",
    "cstrace.api",
    "cstrace.cli",
    "cstrace.render",
    "cstrace.analyses",
    "cstrace.viewer",
)


def module_name(path: Path) -> str:
    rel = path.relative_to(SRC).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def modules() -> dict[str, Path]:
    return {module_name(p): p for p in PKG.rglob("*.py")}


def imports_of(name: str, path: Path, known: set[str]) -> set[str]:
    """The cstrace modules ``name`` imports anywhere in its file."""
    tree = ast.parse(path.read_text(), str(path))
    is_pkg = path.name == "__init__.py"
    package = name if is_pkg else name.rpartition(".")[0]
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                out.add(alias.name)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                if node.level > 1:
                    base = base[: -(node.level - 1)]
                mod = ".".join([*base, node.module] if node.module else base)
            else:
                mod = node.module or ""
            for alias in node.names:
                full = f"{mod}.{alias.name}"
                out.add(full if full in known else mod)
    return {m for m in out if m in known and m != name}


def graph() -> dict[str, set[str]]:
    mods = modules()
    known = set(mods)
    return {name: imports_of(name, path, known) for name, path in mods.items()}


def find_cycle(g: dict[str, set[str]]) -> list[str] | None:
    """One import cycle of ``g`` (as a list of modules, first repeated last), or None."""
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(n: str) -> list[str] | None:
        state[n] = 1
        stack.append(n)
        for m in sorted(g[n]):
            if state.get(m) == 1:
                return [*stack[stack.index(m) :], m]
            if m not in state:
                found = visit(m)
                if found:
                    return found
        stack.pop()
        state[n] = 2
        return None

    for n in sorted(g):
        if n not in state:
            found = visit(n)
            if found:
                return found
    return None


def under(name: str, prefixes: tuple[str, ...]) -> bool:
    return any(name == p or name.startswith(p + ".") for p in prefixes)


def test_the_graph_sees_imports_inside_functions() -> None:
    g = graph()
    assert "cstrace.protocols.etmv4.decoder" in g["cstrace.protocols.etmv4"]
    # cli imports its renderers inside a function
    assert "cstrace.render.ocsd" in g["cstrace.cli"]


def test_no_import_cycles() -> None:
    cycle = find_cycle(graph())
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


def test_a_cycle_is_found_when_there_is_one() -> None:
    g = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}
    assert find_cycle(g) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


@pytest.mark.parametrize("layer", CORE)
def test_the_core_does_not_import_containers_or_upper_layers(layer: str) -> None:
    bad = {
        (name, m)
        for name, deps in graph().items()
        if under(name, (layer,))
        for m in deps
        if under(m, CONTAINERS + ABOVE_CORE)
    }
    assert not bad, sorted(bad)


def test_only_the_cli_prints() -> None:
    offenders = []
    for name, path in modules().items():
        if name == "cstrace.cli":
            continue
        tree = ast.parse(path.read_text(), str(path))
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id == "print"
            ):
                offenders.append(f"{name}:{node.lineno}")
    assert not offenders, offenders


# -- protocols are named only in protocols/ ------------------------------------------------

# Modules outside protocols/ still allowed to write protocol names or aliases as strings,
# each with the spellings it writes and why. The test also fails when an entry is no
# longer needed, so the list only shrinks.
NAMED_OUTSIDE: dict[str, tuple[frozenset[str], str]] = {
    "cstrace.analyses.profile": (
        frozenset({"etmv3", "etmv4", "ptm"}),
        "perf's cs-etm decoder makes branch samples differently for ETMv3/PTM and ETMv4 "
        "packets, which the perf-like samples copy; TODO issue 29: a ProtocolSpec trait",
    ),
    "cstrace.inputs.detect": (
        frozenset({"ETMv3", "ITM", "etm3", "etm4", "itm", "ptm", "stm"}),
        "stream detection has its own families ('etm4' is ETMv4 or ETE) and their "
        "display names; TODO issue 29: a detection hook per protocol folder",
    ),
    "cstrace.inputs.infer": (
        frozenset(
            {"ETE", "ETM3", "ETM4", "ETMv3", "ETMv4", "PTM"}
            | {"ete", "etm3", "etm4", "etmv3", "etmv4", "ptm"}
        ),
        "configuration inference per detection family and source type; TODO issue 29: "
        "driven by each protocol's field table and settings",
    ),
    "cstrace.inputs.metadata": (
        frozenset(
            {"ETE", "ETM3", "ETM4", "ITM", "PFT", "PFT1", "PTM", "PTM1", "STM"}
            | {"ete", "etm3", "etm4", "itm", "ptm", "stm"}
        ),
        "source-type spellings of metadata files, trace-ID registers and metadata items "
        "per family; TODO issue 29: the trace-ID register and metadata items as "
        "ProtocolSpec fields (DESIGN.md 2)",
    ),
    "cstrace.inputs.perfdata.adapter": (
        frozenset({"ete", "etmv4"}),
        "perf's context-ID mode (thread IDs for ETMv4/ETE); TODO issue 29: a spec trait",
    ),
    "cstrace.inputs.perfdata.csetm": (
        frozenset({"ETE", "ETMv4", "ete", "etmv3", "etmv4", "ptm"}),
        "perf.data's CS_ETM magic numbers name the trace unit, and its register sets "
        "differ per magic; TODO issue 29: the register sets from the field tables",
    ),
    "cstrace.inputs.platform": (
        frozenset({"ETE", "ETM3", "ETM4", "PTM"}),
        "which trace-unit architecture can trace which cores (by source type); "
        "TODO issue 29: a ProtocolSpec trait",
    ),
    "cstrace.inputs.raw": (
        frozenset({"ETM4", "ITM", "STM", "ete", "etm3", "etm4", "itm", "ptm", "stm"}),
        "detection families to source types and the families inference can complete; "
        "TODO issue 29: with detection and inference (see those entries)",
    ),
}


def protocol_words() -> set[str]:
    """Every spelling of a protocol, lower case: names, aliases and source-type prefixes."""
    from cstrace.protocols import MODULES, all_protocols

    words = {w.lower() for w in MODULES}
    for spec in all_protocols():
        words.add(spec.name)
        words.update(spec.aliases)
    return words


def named_protocols(tree: ast.AST, words: set[str]) -> set[str]:
    """The string constants of ``tree`` that spell a protocol (any case), documentation
    (a string standing alone as a statement) aside."""
    docs = {
        id(node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)
    }
    return {
        node.value
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and id(node) not in docs
        and node.value.strip().lower() in words
    }


def test_protocol_names_are_found_in_code() -> None:
    code = '''"""The ptm module."""
KINDS = ("stm", "itm")
def f(p):
    """For etmv4."""
    return p.name == "ETM4" or p in {"pft": 1} or f"{p} is not ptm"
'''
    assert named_protocols(ast.parse(code), protocol_words()) == {"stm", "itm", "ETM4", "pft"}


def test_nothing_outside_protocols_names_a_protocol() -> None:
    words = protocol_words()
    found = {}
    for name, path in modules().items():
        if under(name, ("cstrace.protocols",)):
            continue
        named = named_protocols(ast.parse(path.read_text(), str(path)), words)
        if named:
            found[name] = named
    unexpected = {
        name: sorted(named - NAMED_OUTSIDE.get(name, (frozenset(), ""))[0])
        for name, named in found.items()
    }
    unexpected = {name: named for name, named in unexpected.items() if named}
    assert not unexpected, (
        f"protocol names written outside protocols/ (ask the ProtocolSpec instead): {unexpected}"
    )
    stale = {
        name: sorted(allowed - found.get(name, set()))
        for name, (allowed, _) in NAMED_OUTSIDE.items()
    }
    stale = {name: named for name, named in stale.items() if named}
    assert not stale, f"no longer written there, take them off NAMED_OUTSIDE: {stale}"


# Protocols built on the kit (protocols/kit.py): the same modules and exports in each
# folder, one decoder class on the kit's element sink, and the element path's one loop.
KIT_PROTOCOLS = ("itm", "ptm", "stm", "etmv3")
KIT_MODULES = ("__init__", "config", "decoder", "encoder", "packets", "reader")


@pytest.mark.parametrize("name", KIT_PROTOCOLS)
def test_a_kit_protocol_folder_has_the_same_furniture(name: str) -> None:
    import importlib

    from cstrace.protocols import get_protocol
    from cstrace.protocols.kit import ElementSink

    folder = SRC / "cstrace" / "protocols" / name
    assert sorted(p.stem for p in folder.glob("*.py") if p.stem in KIT_MODULES) == sorted(
        KIT_MODULES
    )
    assert (folder / "decoder.pxd").is_file() and (folder / "reader.pxd").is_file()
    reader = importlib.import_module(f"cstrace.protocols.{name}.reader")
    decoder = importlib.import_module(f"cstrace.protocols.{name}.decoder")
    for export in ("read", "iter_packets", "iter_stream_rows"):
        assert callable(getattr(reader, export)), f"{name}.reader.{export}"
    classes = [
        c
        for c in vars(decoder).values()
        if isinstance(c, type) and issubclass(c, ElementSink) and c is not ElementSink
    ]
    assert len(classes) == 1, f"{name}: one decoder class on the kit, got {classes}"
    assert isinstance(decoder.COLUMNS, tuple) and callable(decoder.iter_elements)
    spec = get_protocol(name)
    assert spec is not None
    assert spec.iter_stream_rows is reader.iter_stream_rows
    assert spec.iter_packets is reader.iter_packets
    assert spec.iter_elements is decoder.iter_elements
    # the element path's loop lives in the reader: no protocol imports another's reader
    for other in KIT_PROTOCOLS:
        if other != name:
            assert f"cstrace.protocols.{other}." not in (folder / "reader.py").read_text()


# The run layer: what decodes a run (the session, the process pool, the cuts of a busy
# stream) asks each protocol's ProtocolSpec (its cuts, its readers...), never a protocol
# module by name.
RUN_LAYER = ("cstrace.decode", "cstrace.parallel", "cstrace.split")


def test_the_run_layer_imports_no_protocol_folder() -> None:
    from cstrace.protocols import MODULES

    folders = tuple(sorted({f"cstrace.protocols.{name}" for name in MODULES.values()}))
    g = graph()
    bad = sorted((name, m) for name in RUN_LAYER for m in g[name] if under(m, folders))
    assert not bad, f"protocol modules imported by the run layer: {bad}"
