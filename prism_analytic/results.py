"""The answer of a :class:`~prism_analytic.job.Job` method: a library result plus its report.

Every task (predict, runtime, slowdown, placement, sensitivity, calibrate, sweep, trace
prediction) returns a :class:`Result` wrapping the library's own result object. The report
is the ``prism`` command's: :meth:`Result.summary` is the text the command prints,
:meth:`Result.to_dict` its ``--json`` content, :meth:`Result.plot` its ``--plot`` figure.
Attributes the wrapper does not define (``quantile``, ``mean``, ``rows``, ``to_toml`` ...)
are the wrapped object's.
"""

from __future__ import annotations

import html
import os
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["Result"]

#: Rows shown by the notebook table at most (the rest is in :meth:`Result.to_dict`).
HTML_ROWS = 20


class Result:
    """One task's answer: the library result, its text, its JSON content and its plot.

    Parameters
    ----------
    task : str
        What was asked (``"predict"``, ``"runtime"``, ...), used in messages and the HTML.
    value : object
        The library's result (e.g. an :class:`~prism_analytic.engines.result.AnalyticResult`).
    text : str
        The text the matching ``prism`` command prints.
    data : mapping
        The matching ``prism`` command's ``--json`` content.
    draw : callable, optional
        ``draw(ax)`` draws the result on a matplotlib Axes; None when the task has no plot.
    title : str
        Title of the plot.
    figsize : tuple of float
        Size of the plot in inches.
    """

    def __init__(
        self,
        task: str,
        value: Any,
        *,
        text: str,
        data: Mapping[str, Any],
        draw: Callable[[Any], Any] | None = None,
        title: str = "",
        figsize: tuple[float, float] = (6.0, 3.5),
    ) -> None:
        from .json_safe import jsonable

        self.task = task
        self.value = value
        self._text = text
        self._data = jsonable(dict(data))
        self._draw = draw
        self._title = title
        self._figsize = figsize

    def __getattr__(self, name: str) -> Any:
        # only reached for names the wrapper lacks: the wrapped result answers them
        if name.startswith("_") or name == "value":
            raise AttributeError(name)
        return getattr(self.value, name)

    def __dir__(self) -> list[str]:
        return sorted(set(super().__dir__()) | set(dir(self.value)))

    def __repr__(self) -> str:
        first = self._text.splitlines()[0] if self._text else ""
        return f"<Result {self.task}: {first}>"

    def summary(self) -> str:
        """The text the ``prism`` command prints for this task."""
        return self._text

    def to_dict(self) -> dict[str, Any]:
        """The ``prism`` command's ``--json`` content (plain JSON values, non-finite as None)."""
        import copy

        return copy.deepcopy(self._data)

    def plot(self, path: str | os.PathLike[str] | None = None) -> Any:
        """Draw the result (the ``--plot`` figure); write it to ``path`` when given.

        Parameters
        ----------
        path : str or PathLike, optional
            File to write (png, pdf, svg, ...); a name without a suffix gets ``.png``.

        Returns
        -------
        matplotlib.figure.Figure

        Raises
        ------
        ValueError
            When the task has no plot, or ``path`` cannot be written (a directory, a missing
            folder, an unsupported format); checked before anything is drawn.
        """
        if self._draw is None:
            raise ValueError(f"plot: a {self.task} result has no plot; use summary() or to_dict()")
        target = _checked_path(path)
        from matplotlib.figure import Figure

        fig = Figure(figsize=self._figsize)
        ax = fig.subplots()
        self._draw(ax)
        if self._title:
            ax.set_title(self._title)
        fig.tight_layout()
        if target is not None:
            fig.savefig(target)
        return fig

    def _repr_html_(self) -> str:
        """A small table for notebooks: the rows of the result, or its scalar fields."""
        head = self._text.splitlines()[0] if self._text else self.task
        rows = _table_rows(self._data)
        if not rows:
            return f"<p><b>{html.escape(head)}</b></p>"
        columns = list(dict.fromkeys(k for row in rows for k in row))
        cells = "".join(f"<th>{html.escape(str(c))}</th>" for c in columns)
        body = [f"<tr>{cells}</tr>"]
        for row in rows[:HTML_ROWS]:
            body.append(
                "<tr>" + "".join(f"<td>{_cell(row.get(c))}</td>" for c in columns) + "</tr>"
            )
        more = len(rows) - HTML_ROWS
        tail = f"<p>... {more} more rows in to_dict()</p>" if more > 0 else ""
        return f"<table><caption>{html.escape(head)}</caption>{''.join(body)}</table>{tail}"


def _checked_path(path: str | os.PathLike[str] | None) -> Any:
    """The file ``path`` names, checked as ``--plot`` is (message names ``path``)."""
    if path is None:
        return None
    from .cli.output import check_plot_path

    try:
        return check_plot_path(path)
    except ValueError as exc:
        raise ValueError(str(exc).replace("--plot:", "plot path:", 1)) from None


def _table_rows(data: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The first list of records in ``data``, else its scalar fields as (field, value) rows."""
    for value in data.values():
        if isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
            return [{k: v for k, v in row.items() if _scalar(v)} for row in value]
    return [{"field": k, "value": v} for k, v in data.items() if _scalar(v)]


def _scalar(value: Any) -> bool:
    return value is None or isinstance(value, bool | int | float | str)


def _cell(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.6g}"
    text = "" if value is None else str(value)
    return html.escape(text if len(text) <= 80 else text[:77] + "...")
