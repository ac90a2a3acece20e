#!/usr/bin/env python3
"""Writes data/digits/digits.safetensors from scikit-learn's bundled handwritten digits.

This is the built-in data set of `wsctl train` (host_driver::train::data). It was run once
and its output is checked in; run it again only to regenerate the file:

    .venv/bin/pip install -r host-driver/requirements-bench.txt
    .venv/bin/python data/digits/convert.py

The digits ship inside the scikit-learn wheel (`sklearn.datasets.load_digits`), so nothing is
downloaded. The pixels are stored as they are, counts 0..16 in u8; the `scale` metadata says
to divide by 16 to get [0, 1]. data/digits/README.md gives the provenance and the licence.
"""

import argparse
import json
import pathlib
import struct

import numpy
from sklearn.datasets import load_digits

HERE = pathlib.Path(__file__).resolve().parent


def write_safetensors(path: pathlib.Path, tensors: dict, metadata: dict) -> None:
    """Writes u8 tensors in the safetensors format, byte for byte the same on every run.

    The format is an 8-byte little-endian header length, a JSON header (tensor name ->
    dtype, shape, data offsets; `__metadata__` -> string map), then the raw data. The Python
    `safetensors` package orders the metadata differently from run to run, so the header is
    written here with sorted keys and padded with spaces to 8 bytes, as the format allows.
    """
    header = {"__metadata__": dict(sorted(metadata.items()))}
    data = bytearray()
    for name in sorted(tensors):
        array = tensors[name]
        if array.dtype != numpy.uint8:
            raise SystemExit(f"{name}: only u8 tensors are written here, got {array.dtype}")
        header[name] = {
            "dtype": "U8",
            "shape": list(array.shape),
            "data_offsets": [len(data), len(data) + array.nbytes],
        }
        data += array.tobytes(order="C")
    text = json.dumps(header, separators=(",", ":")).encode("utf-8")
    text += b" " * (-(len(text) + 8) % 8)
    path.write_bytes(struct.pack("<Q", len(text)) + text + bytes(data))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--out",
        type=pathlib.Path,
        default=HERE / "digits.safetensors",
        help="where to write the file (default: beside this script)",
    )
    args = parser.parse_args()

    digits = load_digits()
    data, target = digits.data, digits.target
    # The bundled values are whole counts of "on" pixels in a 4x4 block: check before narrowing,
    # so a future scikit-learn that rescales them fails here instead of writing wrong bytes.
    if data.shape != (1797, 64) or target.shape != (1797,):
        raise SystemExit(f"unexpected shapes {data.shape} and {target.shape}")
    if not (numpy.all(data == numpy.round(data)) and data.min() >= 0 and data.max() <= 16):
        raise SystemExit("pixel values are not whole numbers in 0..16")
    if target.min() < 0 or target.max() > 9:
        raise SystemExit("labels are not 0..9")

    tensors = {
        "x": numpy.ascontiguousarray(data.astype(numpy.uint8)),
        "y": numpy.ascontiguousarray(target.astype(numpy.uint8)),
    }
    metadata = {
        "source": "UCI ML repository, Optical Recognition of Handwritten Digits "
        "(E. Alpaydin, C. Kaynak, 1998), test set of 1797 samples as bundled by "
        "scikit-learn (sklearn.datasets.load_digits)",
        "licence": "CC BY 4.0; see data/digits/README.md for the attribution",
        "scale": "16",
    }
    write_safetensors(args.out, tensors, metadata)
    print(f"wrote {args.out}: x {tensors['x'].shape} u8, y {tensors['y'].shape} u8")


if __name__ == "__main__":
    main()
