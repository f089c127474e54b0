"""Side by side with the authors' released ADBS code, on identical data, over seeds.

    python bench/vs_official.py --official adbs-official            # GPU, seeds 1 2 3, 8 epochs
    python bench/vs_official.py --official PATH --seeds 1 2 3 4 5 --jobs 2
    python bench/vs_official.py --official PATH --ours-set amp=true val_fraction=0.01    # check a change of ours
    python bench/vs_official.py --official PATH --device cpu --epochs 1 --train-per-class 20 \\
        --test-per-class 4 --sessions 2 --seeds 1                                        # the tiny CPU path
    python bench/vs_official.py --official PATH --device cpu --epochs 1 --train-per-class 30 --sessions 1 \\
        --seeds 1 2 3 4 5 6 7 8 --released-from results/vs_official/A --ours-set val_fraction=0.034
                                   # one factor of ours against the released runs of an earlier --out A

What it does, in order (nothing trains before every check has passed):

1. Checks its inputs: the checkout exists and is the released ADBS code (its files, and every patch
   target present exactly as often as expected), seeds are distinct integers >= 1 (the released
   `utils.py: set_seed` treats 0 as "no seed"), a GPU is there when --device cuda, the --ours-set keys
   are Config fields that the tool does not set itself, the output folder is writable.
2. Copies the checkout into a temporary folder and patches the copy (never the checkout). The patches
   are printed and written to the results; see PATCHES below.
3. Writes the embedded benchmark (adbs/data/synthetic.py, --synthetic-version, --synthetic-seed) in the
   CIFAR-100 python layout: the first --train-per-class / --test-per-class images of every class,
   class-major, as cifar-100-python/{train,test,meta}; and CEC-style index lists: session_1.txt = every
   base-class training image (what the released CIFAR loader trains on), session_2..9.txt = 5 shots of
   each of the 5 classes of incremental sessions 1..8, drawn with this project's per-class protocol
   (adbs/data/protocol.py, seeded draw, --split-seed), i.e. the shots `python -m adbs.run` draws itself
   from the same pool. Both codes read the same files (the released code from data/index_list/cifar100/
   of its copy). Then ours' configuration is checked against the written data (adbs.data.check_data).
4. Runs, for every seed, the released `train.py` (its README's CIFAR-100 command: project adbs,
   -margin, cosine lr 0.1, lr_new 0.01, decay 5e-4; -epochs_base E, -seed S) and ours
   (`python -m adbs.run --preset cifar100 --dataset cifar100 --data-root .. --index-list ..
   --variant adb+ic --base-epochs E --seed S`), one run after another, or --jobs at a time.
5. Parses both (the released log, ours' result JSON) and prints per-session test accuracy means with
   95% CIs (t-distribution, adbs_lab/stats/intervals.py: mean_t), ours - released per session with a Welch 95% CI,
   the negative base boundaries after base epoch 1 and after the base session (per seed, mean and 95% CI
   per code, ours - released with a Welch 95% CI), per-epoch times, and every setting of ours that
   differs from the released run. Everything goes to --out: vs_official.json, runs.csv, summary.csv,
   negatives.csv, report.txt, data.json (the data's sha256), both codes' logs and ours' result JSONs.
   With --released-from A the released runs are taken from the earlier results folder A (same data,
   checked by sha256, same seeds, epochs, sessions and device) and only ours runs: the released code's
   runs do not depend on --ours-set, so each factor of ours costs ours' runs only.

PATCHES (to the temporary copy): bench/side_by_side/patches.yaml lists each one, the file, the exact text
found and put, and why. In short: no md5 checks and a numpy-2 fix (dataloader/cifar100/cifar.py); VS_* lines
printed per base epoch and per session (models/adbs/fscil_trainer.py); with --device cpu only, every CUDA call
moved to the CPU and the hard-coded num_workers=8 -> args.num_workers (the tool passes 0); with --sessions
below 8 only, the released cifar100 session count. And one run setting, an argument rather than a patch:
`-num_crops 1 1 -size_crops 32 32` instead of the published 2 x 224 px + 4 x 96 px multi-crops, which the
released base_train computes and drops (models/adbs/helper.py: base_train trains on data[0] only): the same
training, ~10x less loader time.

The released code is CUDA-only (`.cuda()` everywhere). With --device cpu the cpu-device and cpu-workers
patches run it on the CPU and ours runs with --device cpu, so the whole tool runs end to end on a CPU at
tiny settings (tests/bench/test_vs_official.py, marked slow). CPU runs check the plumbing, not fidelity:
fidelity runs are GPU runs (--device cuda, the default).

Session 0 of the released code is what it reports: the best test accuracy over the base epochs and after
the prototype replacement (models/adbs/fscil_trainer.py: trlog['max_acc']). The test accuracy of the
model it carries into the sessions (VS_SESSION_ACC 0) is reported beside it as s0_carried.

The code is the package bench/side_by_side/ (one module a step); this file is its command. It keeps the
documented path `python bench/vs_official.py`: a package cannot share this file's name.
"""

from __future__ import annotations

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
for _p in (REPO, REPO / "bench"):  # adbs for ours' config checks; the side_by_side package beside this file
    if str(_p) not in sys.path:
        sys.path.insert(0, str(_p))

from side_by_side.cli import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
