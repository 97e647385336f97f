"""The web trace viewer: ``cstrace view INPUT`` serves a page that links the executed
instructions with their source, disassembly, data and time.

Input: a :class:`~cstrace.trace.Trace`; output: a :class:`TraceStore` (the trace
decoded once into DuckDB and NumPy columns, and the page's queries) and a local HTTP
server (:func:`make_server`) for the page in ``static/``.
"""

from cstrace.viewer.server import ViewerServer, make_server
from cstrace.viewer.store import TraceStore

__all__ = ["TraceStore", "ViewerServer", "make_server"]
