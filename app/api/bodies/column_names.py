"""The columns a body names (a CSV header, a Parquet or Arrow schema) and the 422s that teach
them.

A header a route does not take is answered with what the route expects and what the body has
(:func:`wrong_header`), and two mistakes pandas makes easy are named as such: a frame written
with its index (``df.to_csv(path)`` writes an unnamed first column, a CSV read back and written
again calls it ``Unnamed: 0``, and pyarrow stores a non-default index as
``__index_level_0__``), and a frame written without its header (the first row holds numbers).
Both are checked on the names alone, once a body: never a row at a time.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from app.api.bodies.csv_columns import BOOLEAN_CELLS
from app.api.places import invalid
from app.errors import InvalidInput

BATCH_COLUMNS = "score,label[,weight] or score_0..score_{k-1},label[,weight]"
"""The columns of a labelled batch (fit, diagnostics, compare), in any order."""
OUTCOME_COLUMNS = "id,label"
"""The columns of an outcomes CSV, in either order."""
FIRST_INDEX_NAMES = ("", "unnamed: 0")
"""A first column's name as pandas writes its index: none, or none read back and written again."""
PYARROW_INDEX = "__index_level_0__"
"""The column pyarrow stores a frame's index in (Parquet, Arrow) when it is not 0..n-1."""
SHOWN_COLUMNS = 6
SHOWN_CHARACTERS = 80
SHOWN_NAME = 40


def shown(text: str, limit: int = SHOWN_NAME) -> str:
    """``text`` quoted, cut after ``limit`` characters."""
    return repr(text if len(text) <= limit else f"{text[:limit]}...")


def found(names: Sequence[str]) -> str:
    """The first :data:`SHOWN_COLUMNS` names as a header writes them, at most
    :data:`SHOWN_CHARACTERS` characters of them, quoted."""
    text = ",".join(names[:SHOWN_COLUMNS])
    if len(names) > SHOWN_COLUMNS and len(text) <= SHOWN_CHARACTERS:
        text += ",..."
    return shown(text, SHOWN_CHARACTERS)


def wrong_header(
    names: Sequence[str],
    loc: tuple[str | int, ...],
    why: str,
    expected: str,
    noun: str = "header",
) -> InvalidInput:
    """The 422 at ``loc`` of a header (``names`` as written) a route does not take: ``why``,
    then the ``expected`` columns and what the body has instead."""
    return invalid(loc, f"{why}; expected the {noun} {expected}; found {found(names)}")


def check_pandas_mistakes(
    names: Sequence[str], loc: tuple[str | int, ...], expected: str, noun: str = "header"
) -> None:
    """422 for a header that is a row of numbers (a frame written with ``header=False``, or
    no header at all) or that holds a pandas index."""
    if names and all(_is_number(name) for name in names):
        why = (
            "is missing: the first row holds numbers, not column names"
            if noun == "header"
            else "names its columns with numbers"
        )
        raise wrong_header(names, loc, why, expected, noun)
    for i, name in enumerate(names):
        if name == PYARROW_INDEX or (i == 0 and name.strip().lower() in FIRST_INDEX_NAMES):
            what = "unnamed" if not name.strip() else f"named {shown(name)}"
            why = (
                f"is {what}: the column looks like a pandas index; write the frame with index=False"
            )
            raise wrong_header(names, (*loc, i), why, expected, noun)


def batch_columns(
    names: Sequence[str], field: str, *, written: Sequence[str] | None = None
) -> Mapping[str, list[int]]:
    """The positions of a batch's columns by role (``scores``, ``label``, ``weight``), from
    its column names (a CSV header lower-cased, its cells ``written`` as they are; a Parquet or
    Arrow schema); 422 naming the problem, the columns expected and those found."""
    as_written = names if written is None else written
    noun = "columns" if written is None else "header"
    loc: tuple[str | int, ...] = ("body", field, "header")

    def wrong(why: str, *at: int) -> InvalidInput:
        return wrong_header(as_written, (*loc, *at), why, BATCH_COLUMNS, noun)

    check_pandas_mistakes(as_written, loc, BATCH_COLUMNS, noun)
    known = {"score", "label", "weight"}
    multi = sorted(
        (index, i) for i, h in enumerate(names) if (index := _class_column(h)) is not None
    )
    for i, name in enumerate(names):
        if name not in known and _class_column(name) is None:
            raise wrong(f"is the unknown column {shown(as_written[i])}", i)
    if len(set(names)) != len(names):
        raise wrong("repeats a column name")
    if "label" not in names:
        raise wrong("has no 'label' column")
    if "score" in names and multi:
        raise wrong("mixes 'score' with 'score_0..'")
    if multi:
        if [j for j, _ in multi] != list(range(len(multi))):
            raise wrong("multiclass columns must be score_0..score_{k-1}")
        score_cols = [i for _, i in multi]
    elif "score" in names:
        score_cols = [names.index("score")]
    else:
        raise wrong("has no 'score' column")
    weight = [names.index("weight")] if "weight" in names else []
    return {"scores": score_cols, "label": [names.index("label")], "weight": weight}


def _class_column(name: str) -> int | None:
    """j for a column named ``score_j`` (j of at most 6 ASCII digits: more classes are refused
    anyway, and "²" is a digit to ``str.isdigit``, not to ``int``), else None."""
    digits = name.removeprefix("score_")
    if digits == name or not (digits.isascii() and digits.isdigit()) or len(digits) > 6:
        return None
    return int(digits)


def _is_number(name: str) -> bool:
    if name.strip() in BOOLEAN_CELLS:
        return True
    try:
        float(name)
    except ValueError:
        return False
    return True
