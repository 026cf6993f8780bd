"""Open a page as a user would: headless Chromium (Debian's ``chromium``, installed by ``make venv``
when run as root), its DOM as the browser built it and a screenshot of what it drew."""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--hide-scrollbars"]


def chromium() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    return None


needs_chromium = pytest.mark.skipif(
    chromium() is None, reason="headless Chromium is not installed (Debian: apt-get install chromium; "
                               "`make venv` installs it when run as root)")


def _run(args: list[str], timeout: int) -> subprocess.CompletedProcess:
    with tempfile.TemporaryDirectory(prefix="litseg-chromium-") as profile:
        proc = subprocess.run([chromium(), *FLAGS, f"--user-data-dir={profile}", *args], capture_output=True,
                              text=True, timeout=timeout, check=False)
    assert proc.returncode == 0, f"chromium {args} exited {proc.returncode}: {proc.stderr[-2000:]}"
    return proc


def dump_dom(page: Path, *, timeout: int = 120) -> str:
    """The document as Chromium parsed and laid it out, serialised."""
    return _run(["--dump-dom", page.resolve().as_uri()], timeout).stdout


def screenshot(page: Path, png: Path, *, fragment: str = "", size: tuple[int, int] = (1200, 900),
               timeout: int = 120) -> Path:
    """A PNG of the window showing ``page`` (scrolled to ``#fragment`` when given)."""
    url = page.resolve().as_uri() + (f"#{fragment}" if fragment else "")
    _run([f"--screenshot={png}", f"--window-size={size[0]},{size[1]}", url], timeout)
    assert png.is_file() and png.stat().st_size > 0, f"no screenshot written for {url}"
    return png


def colour_runs(png: Path, colours: list[tuple[int, int, int]], *, tolerance: int = 16) -> int:
    """How many boxes with a left border in one of ``colours`` are drawn one below the other.

    The column holding most border pixels is followed from top to bottom; each stretch of a
    border colour (a change of colour starts a new one) is one box.
    """
    from PIL import Image

    def which(pixel: tuple[int, ...]) -> int | None:
        for i, colour in enumerate(colours):
            if all(abs(a - b) <= tolerance for a, b in zip(pixel, colour)):
                return i
        return None

    with Image.open(png) as image:
        rgb = image.convert("RGB")
        width, height = rgb.size
        px = rgb.load()
        column = max(range(width // 2), key=lambda x: sum(which(px[x, y]) is not None for y in range(0, height, 16)))
        runs, previous = 0, None
        for y in range(height):
            current = which(px[column, y])
            if current is not None and current != previous:
                runs += 1
            previous = current
    return runs


def last_inked_row(png: Path) -> int:
    """The lowest row with anything drawn on it (-1 for a blank image)."""
    from PIL import Image, ImageOps

    with Image.open(png) as image:
        box = ImageOps.invert(image.convert("L")).point(lambda v: 255 if v > 55 else 0).getbbox()
    return box[3] - 1 if box else -1


def ink(png: Path) -> float:
    """The share of pixels that are not (nearly) white: 0 for a blank page."""
    from PIL import Image

    with Image.open(png) as image:
        grey = image.convert("L")
        pixels = grey.getdata()
        return sum(1 for p in pixels if p < 200) / max(1, len(pixels))
