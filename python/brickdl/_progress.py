"""Progress of brickdl.tune: a callback of the user's, or a bar (tqdm when installed, else one
updating line on stderr)."""
from __future__ import annotations

import sys
import time
from typing import Any, Callable, Dict, Optional, Tuple, Union

Event = Dict[str, Any]
ProgressArg = Union[None, bool, str, Callable[[Event], Any]]


class _LineBar:
    """One line on stderr, redrawn at most ten times a second:
    measure 12/40  3 resumed  1 failed  0:42 elapsed"""

    def __init__(self, stream=None) -> None:
        self.stream = stream if stream is not None else sys.stderr
        self.failed = 0
        self.resumed = 0
        self.last = 0.0
        self.drawn = False
        self.event: Optional[Event] = None

    def __call__(self, e: Event) -> None:
        self.failed += e["status"] not in ("ok", "")
        self.resumed += bool(e["resumed"])
        self.event = e
        now = time.monotonic()
        if self.drawn and now - self.last < 0.1:
            return
        self.last = now
        self.draw(e)

    def draw(self, e: Event) -> None:
        s = int(e["elapsed_s"])
        self.stream.write(f"\rmeasure {e['done']}/{e['queued']}  {self.resumed} resumed  "
                          f"{self.failed} failed  {s // 60}:{s % 60:02d} elapsed")
        self.stream.flush()
        self.drawn = True

    def close(self) -> None:
        if self.event is not None:
            self.draw(self.event)  # the last state, which the rate limit may have skipped
        if self.drawn:
            self.stream.write("\n")
            self.stream.flush()


class _TqdmBar:
    """tqdm's bar over the candidates handled; the total grows as the driver queues more."""

    def __init__(self, tqdm) -> None:
        self.bar = tqdm(desc="measure", unit="candidate", total=0)

    def __call__(self, e: Event) -> None:
        if e["queued"] != self.bar.total:
            self.bar.total = e["queued"]
        self.bar.update(e["done"] - self.bar.n)

    def close(self) -> None:
        self.bar.close()


def make_progress(progress: ProgressArg) -> Tuple[Optional[Callable[[Event], Any]],
                                                  Callable[[], None]]:
    """The callback to hand the driver and what to call when the run ended.

    progress: None or False (nothing), a callable (called with each event), True or "bar"
    (tqdm when installed, else a line on stderr), "line" (the line on stderr)."""
    if progress is None or progress is False:
        return None, lambda: None
    if callable(progress):
        return progress, lambda: None
    if progress is True or progress == "bar":
        try:
            from tqdm.auto import tqdm
        except ImportError:
            tqdm = None
        bar = _TqdmBar(tqdm) if tqdm is not None else _LineBar()
        return bar, bar.close
    if progress == "line":
        line = _LineBar()
        return line, line.close
    from ._brickdl import UserError
    raise UserError(f"brickdl.tune(progress={progress!r}): expected None, a callable, True, "
                    "'bar' or 'line'")
