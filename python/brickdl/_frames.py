"""Tables as pandas DataFrames when pandas is installed, else as lists of dicts."""
from __future__ import annotations

from typing import Any, Dict, List, Sequence


def have_pandas() -> bool:
    """True when pandas can be imported."""
    try:
        import pandas  # noqa: F401
    except ImportError:
        return False
    return True


def frame(columns: Sequence[str], rows: Sequence[Sequence[Any]], as_frame: bool = True) -> Any:
    """A DataFrame of `rows` under `columns` (pandas present and `as_frame`), else a list of
    dicts, one per row, keyed by column."""
    if as_frame and have_pandas():
        import pandas
        return pandas.DataFrame([list(r) for r in rows], columns=list(columns))
    return [dict(zip(columns, r)) for r in rows]


def records(items: List[Dict[str, Any]], as_frame: bool = True) -> Any:
    """A DataFrame of JSON objects, nested objects flattened to dotted columns
    ("candidate.strategy"), else the objects as they are."""
    if as_frame and have_pandas():
        import pandas
        return pandas.json_normalize(items, sep=".") if items else pandas.DataFrame()
    return items
