"""One plain-text progress bar for every command that runs for more than a moment
(``train``, ``figures``, ``diff``)."""

from __future__ import annotations

import sys
import time


class ProgressBar:
    """A plain-text progress bar on ``stream`` (stderr by default).

    On a terminal it is redrawn in place and always ends its line: log lines printed through
    :meth:`log` clear the bar, print, and redraw it below, and the last step (or :meth:`close`)
    ends the line, so the next output starts on a fresh line. Elsewhere (logs, CI) it prints a
    line at the first step and at each tenth instead. No dependency.

    Parameters
    ----------
    total : int
        The number of steps.
    stream : file, optional
        Where the bar goes (default ``sys.stderr``).
    width : int
        Characters of the bar itself.
    """

    def __init__(self, total: int, stream=None, width: int = 30):
        self.total, self.width = max(int(total), 1), width
        self.stream = sys.stderr if stream is None else stream
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self.start = time.perf_counter()
        self.next_line = 0
        self.text = ""                      # the bar as last drawn ("" once its line has ended)

    def update(self, step: int, loss: float | None = None, label: str = "") -> None:
        """Show step ``step`` of ``total``, with the training ``loss`` and/or a ``label``."""
        elapsed = time.perf_counter() - self.start
        filled = self.width * min(step, self.total) // self.total
        text = f"[{'#' * filled}{'.' * (self.width - filled)}] {step}/{self.total}"
        if loss is not None:
            text += f" loss {loss:.4f}"
        text += f" {elapsed:.1f}s" + (f" {label}" if label else "")
        if self.tty:
            pad = " " * max(len(self.text) - len(text), 0)     # wipe a longer previous bar
            self.stream.write("\r" + text + pad)
            self.text = text
            if step >= self.total:
                self.close()
            self.stream.flush()
        elif step * 10 >= self.next_line * self.total:
            self.stream.write(text + "\n")
            self.stream.flush()
            self.next_line = step * 10 // self.total + 1

    def log(self, line: str, stream=None) -> None:
        """Print ``line`` (to stdout by default) without running it into the bar."""
        stream = sys.stdout if stream is None else stream
        drawn = self.text
        if self.tty and drawn:
            self.stream.write("\r" + " " * len(drawn) + "\r")     # clear the bar's line
            self.stream.flush()
        stream.write(line + "\n")
        stream.flush()
        if self.tty and drawn:
            self.stream.write(drawn)                               # and redraw it below
            self.stream.flush()

    def close(self) -> None:
        """End the bar's line (on a terminal); call once the work is done or abandoned."""
        if self.tty and self.text:
            self.stream.write("\n")
            self.stream.flush()
            self.text = ""
