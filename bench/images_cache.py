"""What a study's trial process saves by loading the embedded benchmark's images instead of generating them.

    python bench/images_cache.py            # generate once, store, load back; times and their ratio, one run

Every trial process of a study needs the images of its `synthetic_seed` (adbs/data/synthetic.py). A study's driver
points its trial processes at one folder for them (adbs_lab/driver/session.py: <storage>/base_cache/images, the
variable ADBS_SYNTHETIC_CACHE), so the first process generates and stores them and every later one loads them,
verified (adbs/data/image_cache.py). This prints, measured in one run on this machine: generating, storing, loading
(with its check), and generate / load. The bytes loaded are checked equal to those generated.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from any cwd without installing

import torch  # noqa: E402

from adbs.data import image_cache, synthetic  # noqa: E402


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seed", type=int, default=0, help="synthetic_seed (default 0, the presets')")
    ap.add_argument("--version", type=int, default=3, help="synthetic_version (default 3, the presets')")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as folder:
        t0 = time.perf_counter()
        pools = synthetic.generate(args.seed, args.version)
        made = time.perf_counter() - t0
        digest = image_cache.content_digest(pools)
        path = image_cache.path(folder, f"synthetic-v{args.version}-seed{args.seed}",
                                Path(synthetic.__file__).read_bytes())
        t1 = time.perf_counter()
        image_cache.store(path, pools, digest, synthetic.CACHE_ENV)
        stored = time.perf_counter() - t1
        t2 = time.perf_counter()
        hit = image_cache.load(path)
        loaded = time.perf_counter() - t2
        assert hit is not None and hit[1] == digest, "the stored images did not load back whole"
        same = all(torch.equal(a.images, b.images) for a, b in zip(pools, hit[0]))
        assert same, "the loaded images differ from the generated ones"
        size = path.stat().st_size / 2**20
    print(f"images of synthetic_seed {args.seed}, version {args.version}: generated in {made:.1f} s, stored in "
          f"{stored:.1f} s ({size:.0f} MiB), loaded and checked in {loaded:.2f} s; generate / load = "
          f"{made / loaded:.0f}x (torch threads {torch.get_num_threads()})")


if __name__ == "__main__":
    main()
