"""Where the course's data lives, and MNIST through torchvision's real class.

Learners online let torchvision download MNIST into the data root. Offline
machines (CI, the course's own tests) build the same raw files from a local
copy of the MNIST test split with :func:`build_offline_mnist`, so notebooks
run their real loading code unchanged.

Command line::

    python -m helpers.data build-offline --source ../shared/data/mnist --dest .cache/course-data
"""

from __future__ import annotations

import argparse
import gzip
import os
import struct
import sys
from pathlib import Path
from typing import Callable

import numpy as np

REPO_ROOT = Path(__file__).resolve().parents[1]
DATA_ENV = "COURSE_DATA"

# Mean and standard deviation of all MNIST training pixels, scaled to [0, 1].
# Lesson 03 shows how they are computed.
MNIST_MEAN = 0.1307
MNIST_STD = 0.3081

# The raw files torchvision.datasets.MNIST looks for under <root>/MNIST/raw.
MNIST_RAW_FILES = {
    "train_images": "train-images-idx3-ubyte",
    "train_labels": "train-labels-idx1-ubyte",
    "test_images": "t10k-images-idx3-ubyte",
    "test_labels": "t10k-labels-idx1-ubyte",
}
IDX_IMAGES_MAGIC = 0x00000803
IDX_LABELS_MAGIC = 0x00000801


def data_root() -> Path:
    """Return the folder that holds the course's data.

    Steps:
        1. Use the ``COURSE_DATA`` environment variable when it is set.
        2. Otherwise use ``data/`` at the top of the course repository.
        3. Create the folder if it does not exist yet.
    """
    root = Path(os.environ.get(DATA_ENV) or REPO_ROOT / "data").expanduser()
    root.mkdir(parents=True, exist_ok=True)
    return root


def mnist_is_present(root: Path | None = None) -> bool:
    """True when the four raw MNIST files are already under ``root/MNIST/raw``."""
    raw = (root or data_root()) / "MNIST" / "raw"
    return all((raw / name).is_file() for name in MNIST_RAW_FILES.values())


def mnist_dataset(train: bool, transform: Callable | None = None):
    """Return ``torchvision.datasets.MNIST`` from the data root.

    Downloads only when the files are missing, and explains what to do when the
    download is impossible (no network) instead of showing a bare traceback.

    Args:
        train: the training split if True, else the test split.
        transform: applied to each PIL image, e.g. ``transforms.ToTensor()``.
    """
    from torchvision import datasets

    root = data_root()
    present = mnist_is_present(root)
    try:
        return datasets.MNIST(root=str(root), train=train, transform=transform, download=not present)
    except (RuntimeError, OSError) as error:
        raise RuntimeError(
            f"MNIST is not in {root / 'MNIST' / 'raw'} and could not be downloaded ({error}).\n"
            "Connect to the internet and run this cell again, or point the COURSE_DATA "
            "environment variable at a folder that already holds MNIST/raw/ "
            "(see the README's 'Data' section)."
        ) from None


def read_idx(path: Path) -> np.ndarray:
    """Read an IDX file (optionally gzip-compressed) into a uint8 array."""
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rb") as f:
        data = f.read()
    magic, = struct.unpack(">I", data[:4])
    if magic not in (IDX_IMAGES_MAGIC, IDX_LABELS_MAGIC):
        raise ValueError(f"{path} is not an MNIST IDX file (magic number {magic:#010x})")
    ndim = magic & 0xFF
    shape = struct.unpack(f">{ndim}I", data[4 : 4 + 4 * ndim])
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * ndim).reshape(shape)


def write_idx(path: Path, array: np.ndarray) -> None:
    """Write a uint8 array as an uncompressed IDX file (the layout torchvision reads)."""
    magic = IDX_IMAGES_MAGIC if array.ndim == 3 else IDX_LABELS_MAGIC
    header = struct.pack(">I", magic) + struct.pack(f">{array.ndim}I", *array.shape)
    path.write_bytes(header + np.ascontiguousarray(array, dtype=np.uint8).tobytes())


def build_offline_mnist(source: Path, dest_root: Path, n_train: int = 8000) -> Path:
    """Turn the 10,000-image MNIST test split into torchvision's four raw files.

    Steps:
        1. Read ``t10k-images-idx3-ubyte.gz`` and ``t10k-labels-idx1-ubyte.gz`` from ``source``.
        2. Keep the first ``n_train`` digits as "train" and the rest as "test".
        3. Write them uncompressed to ``dest_root/MNIST/raw`` under the names torchvision expects.

    Returns:
        ``dest_root``, ready to be used as ``COURSE_DATA``.
    """
    source, dest_root = Path(source), Path(dest_root)
    images_file = source / "t10k-images-idx3-ubyte.gz"
    labels_file = source / "t10k-labels-idx1-ubyte.gz"
    for needed in (images_file, labels_file):
        if not needed.is_file():
            raise FileNotFoundError(
                f"{needed} is missing: the offline fixture needs the MNIST test split "
                "(t10k-images-idx3-ubyte.gz and t10k-labels-idx1-ubyte.gz) in that folder."
            )
    images, labels = read_idx(images_file), read_idx(labels_file)
    if len(images) != len(labels) or not 0 < n_train < len(images):
        raise ValueError(f"cannot split {len(images)} images into {n_train} train and the rest test")
    raw = dest_root / "MNIST" / "raw"
    raw.mkdir(parents=True, exist_ok=True)
    write_idx(raw / MNIST_RAW_FILES["train_images"], images[:n_train])
    write_idx(raw / MNIST_RAW_FILES["train_labels"], labels[:n_train])
    write_idx(raw / MNIST_RAW_FILES["test_images"], images[n_train:])
    write_idx(raw / MNIST_RAW_FILES["test_labels"], labels[n_train:])
    return dest_root


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m helpers.data", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    build = sub.add_parser("build-offline", help="write the offline MNIST fixture")
    build.add_argument("--source", type=Path, default=REPO_ROOT.parent / "shared" / "data" / "mnist")
    build.add_argument("--dest", type=Path, required=True)
    build.add_argument("--n-train", type=int, default=8000)
    args = parser.parse_args(argv)
    try:
        root = build_offline_mnist(args.source, args.dest, args.n_train)
    except (FileNotFoundError, ValueError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    print(f"offline MNIST written to {root / 'MNIST' / 'raw'} ({args.n_train} train digits)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
