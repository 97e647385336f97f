"""Element batches to a Parquet file: one row per element, typed columns (Arrow).

Input: the runs of a decode (:class:`~cstrace.decode.SourceRun`), or Parquet
files of runs written elsewhere (a worker process's); output: one Parquet
file whose rows are the elements in decode order. The columns are those of
:meth:`cstrace.batch.ElementBatch.to_arrow` (optional fields as nulls,
enumerations as their numbers, schema metadata naming the element types)
followed by ``buffer``, the name of the trace buffer the element was decoded
from. DuckDB, pandas or Polars read it as it is::

    SELECT trace_id, count(*) FROM 'trace.parquet' GROUP BY trace_id

Needs ``pyarrow`` (``pip install 'cstrace[parquet]'``). Memory stays flat:
each batch is written as it comes (one row group per batch).
"""

from __future__ import annotations

from types import TracebackType
from typing import Any

from cstrace.batch import ElementBatch
from cstrace.decode import SourceRun
from cstrace.errors import CstraceError

__all__ = ["ParquetSink", "parquet_schema"]

BATCH_ROWS = 65536
"""Rows per batch (and per row group)."""


def _pyarrow() -> tuple[Any, Any]:
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:
        raise CstraceError(
            "--format parquet needs pyarrow: pip install 'cstrace[parquet]'"
        ) from None
    return pa, pq


def parquet_schema() -> Any:
    """The Arrow schema of the file (a ``pyarrow.Schema``): the batch columns, then ``buffer``."""
    pa, _ = _pyarrow()
    schema = ElementBatch.empty().to_arrow().schema
    field = pa.field("buffer", pa.string(), False, metadata={"doc": "trace buffer name"})
    return schema.append(field)


class ParquetSink:
    """Writes element rows to one Parquet file, in the order they are given."""

    def __init__(self, path: str) -> None:
        pa, pq = _pyarrow()
        self._pa = pa
        self._pq = pq
        self.schema = parquet_schema()
        self.rows = 0
        """Rows written so far."""
        self._writer = pq.ParquetWriter(path, self.schema, compression="zstd")

    def write_batch(self, batch: ElementBatch, buffer: str) -> None:
        """Append the rows of ``batch``, decoded from the buffer named ``buffer``."""
        table = batch.to_arrow()
        names = self._pa.repeat(self._pa.scalar(buffer, self._pa.string()), len(batch))
        table = table.append_column(self.schema.field("buffer"), names)
        self._writer.write_table(table)
        self.rows += len(batch)

    def write_run(self, run: SourceRun, size: int = BATCH_ROWS) -> None:
        """Append the elements of ``run`` (decoded now, a batch at a time)."""
        name = run.buffer.name
        for batch in run.batches(size):
            self.write_batch(batch, name)

    def append_file(self, path: str) -> None:
        """Append the rows of a Parquet file written by another sink (a batch at a time)."""
        source = self._pq.ParquetFile(path)
        for record_batch in source.iter_batches(batch_size=BATCH_ROWS):
            self._writer.write_batch(record_batch)
            self.rows += record_batch.num_rows

    def close(self) -> None:
        """Finish the file (its footer); nothing can be written after."""
        self._writer.close()

    def __enter__(self) -> ParquetSink:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
