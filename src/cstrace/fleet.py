"""Fleets of captures on a Dask distributed cluster: one task per input.

Input: the address of a Dask scheduler, a function and the argument tuples
of its calls (one per input: a capture to decode or to profile); output: for
each call, in the order given, the address of the worker that ran it and
what it returned. The function and its arguments travel to the workers by
pickling (a module-level function of cstrace goes by name: cstrace must be
installed on the workers), and files named in the arguments must be on a
file system the workers share.

Needs ``dask[distributed]`` (``pip install 'cstrace[dask]'``). A local
process pool stays the default way to decode in parallel
(:mod:`cstrace.parallel`); this is for more captures than one machine
decodes in good time. ``docs/performance.md`` has a recipe.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from cstrace.errors import CstraceError

__all__ = ["map_on_dask"]

R = TypeVar("R")

CONNECT_TIMEOUT = 30.0
"""Seconds to wait for the scheduler to answer."""


def _on_worker(fn: Callable[..., R], args: tuple[Any, ...]) -> tuple[str, R]:
    """Run ``fn(*args)`` in a worker; the worker's address with the result."""
    from distributed import get_worker

    address = str(get_worker().address)
    return address, fn(*args)


def map_on_dask(
    address: str,
    fn: Callable[..., R],
    calls: Sequence[tuple[Any, ...]],
    name: str = "cstrace",
) -> list[tuple[str, R]]:
    """``fn(*args)`` for each of ``calls`` as tasks on the scheduler at ``address``.

    Returns ``(worker address, result)`` per call, in the order of ``calls``.
    Task keys start with ``cstrace-<name>-``. An exception in a task is raised
    here; a scheduler that cannot be reached is a :class:`CstraceError`.
    """
    try:
        from distributed import Client
    except ImportError:
        raise CstraceError("--dask needs dask.distributed: pip install 'cstrace[dask]'") from None
    import dask

    try:
        with dask.config.set({"distributed.comm.timeouts.connect": f"{CONNECT_TIMEOUT}s"}):
            client = Client(address, timeout=CONNECT_TIMEOUT, set_as_default=False)  # type: ignore[no-untyped-call]
    except (OSError, TimeoutError) as exc:
        raise CstraceError(f"--dask {address}: cannot reach the scheduler ({exc})") from None
    token = uuid.uuid4().hex[:12]
    with client:
        futures = [
            client.submit(_on_worker, fn, args, key=f"cstrace-{name}-{token}-{i}", pure=False)
            for i, args in enumerate(calls)
        ]
        results: list[tuple[str, R]] = client.gather(futures)  # type: ignore[no-untyped-call]
        return results
