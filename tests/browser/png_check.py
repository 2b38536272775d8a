"""Checks a PNG screenshot: its size is the one asked for, and it is not blank (its rows hold
many different byte values, as drawn text and grids do). Standard library only."""
import struct
import sys
import zlib


def main(path, width, height):
    data = open(path, "rb").read()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        sys.exit(f"{path}: not a PNG")
    pos, idat, size = 8, b"", None
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            size = struct.unpack(">II", body[:8])
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    if size != (width, height):
        sys.exit(f"{path}: {size}, expected {(width, height)}")
    pixels = zlib.decompress(idat)
    distinct = len(set(pixels))
    if distinct < 32:
        sys.exit(f"{path}: looks blank ({distinct} distinct byte values)")
    print(f"{path}: {size[0]}x{size[1]}, {distinct} distinct byte values")


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]))
