"""Train a registered tiny ELFATT model on real images on the CPU, and write the small checkpoint the INT8 tests use.

Data: scikit-learn's handwritten digits (``sklearn.datasets.load_digits``: 1797 8x8 grey images of 0-9, shipped
inside the package, no download), scaled to uint8, made RGB and preprocessed exactly as ``edgeattn compare --images``
and ``edgeattn quantize --calib DIR`` preprocess pictures (shorter side to 16 / 0.875 bicubic, centre crop to
16 x 16, ImageNet mean/std: :func:`edgeattn.compare.preprocess`), so a directory of these digits as PNG files
calibrates the exported model with the inputs it was trained on. A seeded permutation holds out
``HELD_OUT`` images (20 %) that training never sees.

Model: ``vit_tiny_elfatt`` at 16 x 16 with patch 4 (a 4 x 4 token map), width 48, 3 blocks of ELFATT (one EFFATT
head + one blockify head over 2 x 2 windows), 10 classes: ~90 k parameters, a ~365 KB safetensors file.

    nice python benchmarks/train_tiny.py       # ~1 minute of one core; writes the two files below
    python benchmarks/train_tiny.py --epochs 2 --out /tmp/t.safetensors --json /tmp/t.json   # a quick rerun

Seeded (torch, the split, the batch order), single-threaded: a rerun on the same torch build gives the same
weights. Writes ``tests/fixtures/models/vit_tiny_elfatt_digits.safetensors`` and
``benchmarks/results/train_tiny.json`` (held-out accuracy, loss per epoch, time). Target: held-out top-1 >= 95 %.
"""
import argparse
import json
import os
import platform
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CHECKPOINT = os.path.join(REPO, "tests", "fixtures", "models", "vit_tiny_elfatt_digits.safetensors")
RESULT = os.path.join(REPO, "benchmarks", "results", "train_tiny.json")
ARCH = "vit_tiny_elfatt"
IMG_SIZE = 16
CONFIG = {"embed_dim": 48, "depth": 3, "num_heads": 2, "patch_size": 4, "window_size": 2}
NUM_CLASSES = 10
HELD_OUT = 360
SEED = 0
TARGET_ACCURACY = 0.95


def digits_pictures():
    """``(pictures N x 8 x 8 x 3 uint8, labels N)``: scikit-learn's digits as RGB pictures (ink bright)."""
    import numpy as np
    from sklearn.datasets import load_digits

    digits = load_digits()
    grey = np.round(digits.images * (255.0 / 16.0)).astype(np.uint8)
    return np.repeat(grey[..., None], 3, axis=3), digits.target.astype(np.int64)


def split_indices(count, seed=SEED, held_out=HELD_OUT):
    """``(train, test)`` index arrays of the seeded split: the first ``held_out`` of a permutation are held out."""
    import numpy as np

    order = np.random.default_rng(seed).permutation(count)
    return order[held_out:], order[:held_out]


def digits_split(seed=SEED, held_out=HELD_OUT):
    """``(train_x, train_y, test_x, test_y)``: preprocessed N x 3 x 16 x 16 float32 arrays and int64 labels."""
    import numpy as np

    from edgeattn.compare import preprocess

    pictures, labels = digits_pictures()
    images = np.stack([preprocess(picture, IMG_SIZE, IMG_SIZE) for picture in pictures])
    train, test = split_indices(len(images), seed, held_out)
    return images[train], labels[train], images[test], labels[test]


def accuracy(logits, labels):
    import numpy as np

    return float(np.mean(np.argmax(logits, axis=1) == labels))


def train(epochs, batch_size, lr, seed=SEED, progress=None):
    import torch

    from edgeattn.models import create_model

    torch.manual_seed(seed)
    train_x, train_y, test_x, test_y = digits_split(seed)
    model = create_model(ARCH, img_size=IMG_SIZE, num_classes=NUM_CLASSES, **CONFIG)
    optimiser = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.05)
    steps = epochs * ((len(train_x) + batch_size - 1) // batch_size)
    schedule = torch.optim.lr_scheduler.OneCycleLR(optimiser, max_lr=lr, total_steps=steps, pct_start=0.15)
    x_all, y_all = torch.from_numpy(train_x), torch.from_numpy(train_y)
    generator = torch.Generator().manual_seed(seed)
    history = []
    for epoch in range(epochs):
        model.train()
        order = torch.randperm(len(x_all), generator=generator)
        total = 0.0
        for start in range(0, len(order), batch_size):
            index = order[start:start + batch_size]
            loss = torch.nn.functional.cross_entropy(model(x_all[index]), y_all[index], label_smoothing=0.1)
            optimiser.zero_grad()
            loss.backward()
            optimiser.step()
            schedule.step()
            total += loss.item() * len(index)
        history.append(round(total / len(order), 4))
        if progress:
            progress("epoch {}/{}: loss {:.4f}".format(epoch + 1, epochs, history[-1]))
    model.eval()
    with torch.no_grad():
        test_logits = model(torch.from_numpy(test_x)).numpy()
        train_logits = model(x_all).numpy()
    return model, {"loss_per_epoch": history, "held_out_top1": accuracy(test_logits, test_y),
                   "train_top1": accuracy(train_logits, train_y), "held_out": int(len(test_y)),
                   "train": int(len(train_y)), "parameters": int(sum(p.numel() for p in model.parameters()))}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=20)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--lr", type=float, default=4e-3)
    parser.add_argument("--out", default=CHECKPOINT, help="checkpoint path (.safetensors)")
    parser.add_argument("--json", default=RESULT, help="result JSON path")
    args = parser.parse_args(argv)
    import torch

    from edgeattn.models.checkpoint import save_checkpoint

    torch.set_num_threads(1)  # deterministic reductions, and no oversubscription of a shared 2-core machine
    started, cpu_started = time.time(), time.process_time()
    model, record = train(args.epochs, args.batch_size, args.lr,
                          progress=lambda line: print(line, file=sys.stderr, flush=True))
    seconds, cpu_seconds = time.time() - started, time.process_time() - cpu_started
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    save_checkpoint(model, args.out)
    result = {
        "benchmark": "train_tiny",
        "arch": ARCH, "img_size": IMG_SIZE, "num_classes": NUM_CLASSES, "config": CONFIG,
        "data": "sklearn.datasets.load_digits (1797 8x8 images), RGB, edgeattn.compare.preprocess to {0}x{0}, "
                "seeded split ({1} held out)".format(IMG_SIZE, HELD_OUT),
        "epochs": args.epochs, "batch_size": args.batch_size, "lr": args.lr, "seed": SEED,
        "target_held_out_top1": TARGET_ACCURACY, "met": record["held_out_top1"] >= TARGET_ACCURACY,
        "train_seconds": round(seconds, 1), "train_cpu_seconds": round(cpu_seconds, 1),
        "checkpoint": os.path.relpath(os.path.abspath(args.out), REPO),
        "checkpoint_bytes": os.path.getsize(args.out),
        "host": {"python": platform.python_version(), "torch": torch.__version__, "machine": platform.machine()},
    }
    result.update(record)
    os.makedirs(os.path.dirname(os.path.abspath(args.json)), exist_ok=True)
    with open(args.json, "w") as handle:
        json.dump(result, handle, indent=2)
        handle.write("\n")
    print(json.dumps({key: result[key] for key in ("held_out_top1", "train_top1", "train_seconds", "met")}))
    return 0 if result["met"] else 1


if __name__ == "__main__":
    sys.exit(main())
