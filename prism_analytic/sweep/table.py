"""Resumable sweep tables: CSV or Parquet, one row per configuration, keyed by ``config_id``.

While a sweep runs, each finished row is appended to a journal next to the output
(``OUT.partial.jsonl``, flushed per row) so that a crash loses nothing; at the end the table
is (re)written in the output's format and the journal removed. A rerun with the same output
reads both and skips every configuration whose id already has a final row (status ``ok``,
``invalid`` or ``infeasible``); ``error`` rows are evaluated again. Rows of configurations
that are not in the current sweep are kept, after the current sweep's rows.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

__all__ = [
    "FORMATS",
    "check_output",
    "journal_path",
    "finished_rows",
    "Journal",
    "to_frame",
    "write_table",
    "table_records",
    "sweep_report",
]

#: Table formats, by file suffix.
FORMATS = {".csv": "csv", ".parquet": "parquet", ".pq": "parquet"}
#: Statuses that are final (not re-evaluated on resume).
FINAL = ("ok", "invalid", "infeasible")


def check_output(path: str | os.PathLike[str]) -> Path:
    """The output table's path, checked before any work (format and a writable folder).

    Raises
    ------
    ValueError
        For an unknown suffix, a directory, a missing folder, or no write permission.
    """
    out = Path(path)
    if out.suffix.lower() not in FORMATS:
        raise ValueError(
            f"--out: {str(out)!r} must end in {', '.join(FORMATS)} (CSV or Parquet table)"
        )
    if out.is_dir():
        raise ValueError(f"--out: {str(out)!r} is a directory")
    if not out.parent.is_dir():
        raise ValueError(f"--out: folder {str(out.parent)!r} does not exist")
    if not os.access(out.parent, os.W_OK) or (out.exists() and not os.access(out, os.W_OK)):
        raise ValueError(f"--out: cannot write {str(out)!r} (permission denied)")
    if FORMATS[out.suffix.lower()] == "parquet" or out.exists():
        _pandas()
    return out


def _pandas() -> Any:
    try:
        import pandas as pd
    except ImportError as exc:  # pragma: no cover - pandas is in the test extra
        raise ValueError(
            "writing sweep tables needs pandas (and pyarrow for Parquet):"
            " pip install 'prism_analytic[traces]'"
        ) from exc
    return pd


def journal_path(out: Path) -> Path:
    """The crash-safe journal of rows written while a sweep runs."""
    return out.with_name(out.name + ".partial.jsonl")


def _read_table(out: Path) -> list[dict[str, Any]]:
    if not out.exists():
        return []
    pd = _pandas()
    if FORMATS[out.suffix.lower()] == "csv":
        df = pd.read_csv(out, dtype={"config_id": str})
    else:
        df = pd.read_parquet(out)
    if "config_id" not in df.columns:
        raise ValueError(f"--out: {str(out)!r} exists but is not a sweep table (no config_id)")
    df = df.astype(object).where(df.notna(), None)
    return df.to_dict("records")


def _read_journal(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    rows = []
    with path.open(encoding="utf-8") as fh:
        for line in fh:
            line = line.strip()
            if not line:
                continue
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError:
                break  # a line cut short by a crash: everything before it is intact
    return rows


def finished_rows(out: Path) -> dict[str, dict[str, Any]]:
    """Rows already in the table or its journal, by config id (later rows win)."""
    rows: dict[str, dict[str, Any]] = {}
    for row in _read_table(out) + _read_journal(journal_path(out)):
        rows[str(row["config_id"])] = row
    return rows


class Journal:
    """Append-only JSON-lines log of finished rows, flushed after every row."""

    def __init__(self, out: Path) -> None:
        self.path = journal_path(out)
        self._fh = self.path.open("a", encoding="utf-8")

    def append(self, row: dict[str, Any]) -> None:
        """Write one row as a JSON line and flush it to disk."""
        from ..json_safe import jsonable

        self._fh.write(json.dumps(jsonable(row)) + "\n")
        self._fh.flush()

    def close(self) -> None:
        """Close the journal file (it stays on disk until the table is written)."""
        self._fh.close()


def to_frame(
    records: list[dict[str, Any]], columns: list[str], int_columns: tuple[str, ...]
) -> Any:
    """Rows as a DataFrame with ``int_columns`` as nullable integers."""
    pd = _pandas()
    df = pd.DataFrame.from_records(records, columns=columns)
    for c in int_columns:
        if c in df.columns:
            df[c] = pd.to_numeric(df[c]).astype("Int64")
    return df


def write_table(
    out: Path,
    rows: dict[str, dict[str, Any]],
    order: list[str],
    columns: list[str],
    int_columns: tuple[str, ...] = (),
) -> Any:
    """Write the table (rows of ``order`` first, then any others) and drop the journal.

    ``int_columns`` are stored as nullable integers (an invalid row has no tp), so they read
    back as integers rather than floats.

    Returns
    -------
    pandas.DataFrame
        The table as written.
    """
    _pandas()
    ids = [i for i in order if i in rows] + [i for i in rows if i not in set(order)]
    records = [rows[i] for i in ids]
    extra = [c for r in records for c in r if c not in columns]
    cols = columns + list(dict.fromkeys(extra))
    df = to_frame(records, cols, int_columns)
    tmp = out.with_name(out.name + ".tmp")
    if FORMATS[out.suffix.lower()] == "csv":
        df.to_csv(tmp, index=False)
    else:
        df.to_parquet(tmp, index=False)
    os.replace(tmp, out)  # atomic: a crash never leaves a half-written table
    journal_path(out).unlink(missing_ok=True)
    return df


def table_records(table: Any) -> list[dict[str, Any]]:
    """The sweep table's rows as plain dicts, missing values as None."""
    if hasattr(table, "to_dict"):
        return table.astype(object).where(table.notna(), None).to_dict("records")
    return list(table)


def sweep_report(outcome: Any, out: Path | None, configurations: int) -> tuple[str, dict[str, Any]]:
    """What ``prism sweep`` prints for ``outcome``: its text and its ``--json`` content.

    The text counts the rows by status and names the best layout by mean and by p95 (the
    first such row on a tie); ``out`` is the table written (None: none).
    """
    records = table_records(outcome.table)
    data = {
        "out": str(out) if out else None,
        "configurations": configurations,
        "evaluated": outcome.evaluated,
        "skipped": outcome.skipped,
        "lost": outcome.lost,
        "rows": records,
    }
    counts: dict[str, int] = {}
    for row in records:
        counts[row["status"]] = counts.get(row["status"], 0) + 1
    lines = [
        f"{len(records)} configurations: "
        + ", ".join(f"{n} {s}" for s, n in sorted(counts.items()))
        + f" ({outcome.evaluated} evaluated now, {outcome.skipped} already in the table)"
    ]
    ok = [r for r in records if r["status"] == "ok"]
    show = ("preset", "gpus", "tp", "pp", "dp", "cp", "vpp", "microbatches")
    for label, col in (("mean", "mean_s"), ("p95", "p95_s")):
        known = [r for r in ok if r.get(col) is not None and float(r[col]) == float(r[col])]
        if not known:
            break
        best = min(known, key=lambda r: float(r[col]))
        lay = ", ".join(f"{c} {best[c]}" for c in show if c in best)
        lines.append(
            f"best by {label}: {lay}: mean {float(best['mean_s']):.4g} s,"
            f" p95 {float(best['p95_s']):.4g} s"
        )
    if out is not None:
        lines.append(f"table written to {out}")
    return "\n".join(lines), data
