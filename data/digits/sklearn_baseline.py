#!/usr/bin/env python3
"""Trains scikit-learn's MLPClassifier on a safetensors data set: the reference for `wsctl train`.

The training benchmark runs this on the same data and the same train/test split as the board
(`Split::to_json` in host_driver::train::data writes SPLIT.json) and reports both accuracies
side by side. It prints one JSON line:

    {"test_accuracy": 0.97, "train_accuracy": 1.0, "epochs": 30}

Example (needs host-driver/requirements-bench.txt in the venv):

    .venv/bin/python data/digits/sklearn_baseline.py --data data/digits/digits.safetensors \\
        --split split.json --hidden 32 --epochs 30 --seed 1 --lr 0.001 --batch 32

The data file holds `x` (N x D, u8 or f32) and `y` (N labels); x is divided by the `scale`
metadata when the file has one (the digits store pixel counts 0..16 with scale "16"), as the
Rust loader does.
"""

import argparse
import json
import pathlib
import sys
import warnings

import numpy
from safetensors import safe_open
from sklearn.exceptions import ConvergenceWarning
from sklearn.neural_network import MLPClassifier


def hidden_sizes(text: str) -> tuple:
    """`32` or `32,16`: the hidden layers' widths, input to output."""
    try:
        sizes = tuple(int(part) for part in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: give widths like 32 or 32,16") from None
    if not sizes or any(size <= 0 for size in sizes):
        raise argparse.ArgumentTypeError(f"{text!r}: every width must be at least 1")
    return sizes


def load(path: pathlib.Path):
    """x as float64 (scaled by the `scale` metadata if present) and y as int64."""
    with safe_open(str(path), framework="numpy") as f:
        names = set(f.keys())
        if not {"x", "y"} <= names:
            sys.exit(f"{path}: needs tensors x and y, found {sorted(names)}")
        x = f.get_tensor("x").astype(numpy.float64)
        y = f.get_tensor("y").astype(numpy.int64)
        scale = (f.metadata() or {}).get("scale")
    if scale is not None:
        x /= float(scale)
    if x.ndim != 2 or y.ndim != 1 or x.shape[0] != y.shape[0]:
        sys.exit(f"{path}: x must be N x D and y N labels, got {x.shape} and {y.shape}")
    return x, y


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=pathlib.Path, required=True, help="safetensors file")
    parser.add_argument(
        "--split", type=pathlib.Path, required=True, help='JSON {"train": [...], "test": [...]}'
    )
    parser.add_argument("--hidden", type=hidden_sizes, required=True, help="e.g. 32 or 32,16")
    parser.add_argument("--epochs", type=int, required=True)
    parser.add_argument("--seed", type=int, required=True)
    parser.add_argument("--lr", type=float, required=True, help="Adam's learning rate")
    parser.add_argument("--batch", type=int, required=True, help="minibatch size")
    args = parser.parse_args()

    x, y = load(args.data)
    split = json.loads(args.split.read_text())
    train = numpy.asarray(split["train"], dtype=numpy.int64)
    test = numpy.asarray(split["test"], dtype=numpy.int64)
    if len(train) == 0 or len(test) == 0:
        sys.exit(f"{args.split}: train and test must both be non-empty")
    if max(train.max(), test.max()) >= len(y) or min(train.min(), test.min()) < 0:
        sys.exit(f"{args.split}: an index is outside the data set's {len(y)} samples")

    model = MLPClassifier(
        hidden_layer_sizes=args.hidden,
        solver="adam",
        learning_rate_init=args.lr,
        batch_size=args.batch,
        max_iter=args.epochs,
        random_state=args.seed,
        shuffle=True,
    )
    # A fixed epoch count is the point of the comparison: stopping before convergence is
    # intended, so the warning that says so is noise here.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        model.fit(x[train], y[train])

    result = {
        "test_accuracy": float(model.score(x[test], y[test])),
        "train_accuracy": float(model.score(x[train], y[train])),
        "epochs": int(model.n_iter_),
    }
    print(json.dumps(result))


if __name__ == "__main__":
    main()
