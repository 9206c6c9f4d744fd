"""One plain-text progress bar for every command that runs for more than a moment."""

from __future__ import annotations

import sys
import time


class ProgressBar:
    """A plain-text progress bar on ``stream``: redrawn in place on a terminal, else a line
    every 10% (logs and CI output stay readable). No dependency."""

    def __init__(self, total: int, stream=sys.stderr, width: int = 30):
        self.total, self.stream, self.width = total, stream, width
        self.tty = hasattr(stream, "isatty") and stream.isatty()
        self.start = time.perf_counter()
        self.next_line = 0

    def update(self, step: int, loss: float) -> None:
        elapsed = time.perf_counter() - self.start
        filled = self.width * step // self.total
        text = (f"[{'#' * filled}{'.' * (self.width - filled)}] {step}/{self.total} "
                f"loss {loss:.4f} {elapsed:.1f}s")
        if self.tty:
            self.stream.write("\r" + text + ("\n" if step == self.total else ""))
            self.stream.flush()
        elif step * 10 >= self.next_line * self.total:
            self.stream.write(text + "\n")
            self.next_line = step * 10 // self.total + 1
