"""The library facade: every CLI command calls one function here (or in a capability package).

Functions return data (pydantic models / dicts) and raise SpecopsError subclasses; they never print.
Heavy capability modules are imported lazily inside each function.
"""

from __future__ import annotations
