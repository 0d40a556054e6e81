"""A real headless Chromium screenshot of a page or picture the product wrote (Debian's chromium), and a
PNG reader without PIL: shared by the tests that look at what a person sees."""

from __future__ import annotations

import shutil
import struct
import subprocess
import zlib
from pathlib import Path


def screenshot(target: Path, tmp_path: Path, width: int, height: int) -> Path:
    """``target`` (a file) rendered by headless Chromium at ``width``×``height``; returns the PNG."""
    browser = shutil.which("chromium")
    assert browser, "install Debian's chromium: apt-get install -y --no-install-recommends chromium"
    png = tmp_path / "shot.png"
    subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                    "--disable-component-update", "--disable-sync", "--no-first-run",
                    f"--user-data-dir={tmp_path / 'profile'}", f"--screenshot={png}", f"--window-size={width},{height}",
                    f"file://{target}"], check=True, capture_output=True, timeout=120)
    return png


def png_pixels(path) -> tuple[int, int, set]:
    """Decode an 8-bit RGB/RGBA PNG (no PIL): width, height and the distinct pixel values of a sample."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, w, h, bpp = 8, b"", 0, 0, 3
    while pos < len(data):
        n, kind = struct.unpack(">I4s", data[pos:pos + 8])
        chunk = data[pos + 8:pos + 8 + n]
        if kind == b"IHDR":
            w, h, depth, ctype = struct.unpack(">IIBB", chunk[:10])
            bpp = {2: 3, 6: 4}[ctype]
        elif kind == b"IDAT":
            idat += chunk
        pos += 12 + n
    raw = zlib.decompress(idat)
    stride = w * bpp
    prev = bytearray(stride)
    seen, i = set(), 0
    for _row in range(h):
        ftype, line = raw[i], bytearray(raw[i + 1:i + 1 + stride])
        i += 1 + stride
        for x in range(stride):
            a = line[x - bpp] if x >= bpp else 0
            b, c = prev[x], prev[x - bpp] if x >= bpp else 0
            if ftype == 1:
                line[x] = (line[x] + a) & 255
            elif ftype == 2:
                line[x] = (line[x] + b) & 255
            elif ftype == 3:
                line[x] = (line[x] + (a + b) // 2) & 255
            elif ftype == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[x] = (line[x] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        prev = line
        seen.update(bytes(line[x:x + 3]) for x in range(0, stride, bpp * 7))
    return w, h, seen
