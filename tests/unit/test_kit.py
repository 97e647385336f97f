"""The protocol kit's element sink: batches of element rows stay the size asked for."""

from __future__ import annotations

import pytest

from cstrace.batch import SCHEMA
from cstrace.protocols.kit import ElementSink


def _sink(size: int) -> ElementSink:
    offset = next(spec for spec in SCHEMA if spec.name == "offset")
    return ElementSink(0x10, False, True, size, (("offset", offset.dtype.str),))


@pytest.mark.parametrize("per_packet", [1, 2, 3, 7])
def test_batches_stay_near_their_size_when_packets_write_several_rows(per_packet: int) -> None:
    # A reader takes a batch when the sink says it is ready, after each packet; a
    # packet whose rows go past a full batch must not make every later batch larger.
    size = 8
    sink = _sink(size)
    sizes: list[int] = []
    for packet in range(1000):
        for _ in range(per_packet):
            row = sink.next_row()
            sink.arrays["offset"][row] = packet
        if sink.ready():
            batch = sink.take()
            sizes.append(len(batch))
            assert sink.capacity == size and sink.rows == 0
    batch = sink.take()
    if batch is not None:
        sizes.append(len(batch))
    assert sum(sizes) == 1000 * per_packet
    assert max(sizes) <= size + per_packet - 1
    assert all(s >= size for s in sizes[:-1])


def test_rows_written_past_a_full_batch_keep_their_values() -> None:
    sink = _sink(4)
    for value in range(11):  # one "packet" writing 11 rows: the columns grow twice
        row = sink.next_row()
        sink.arrays["offset"][row] = 100 + value
    assert sink.ready()
    batch = sink.take()
    assert batch["offset"].tolist() == [100 + v for v in range(11)]
    assert sink.capacity == 4
