"""The config the lookup gives each transposed case at the sizes named ({case label: config dict}),
for before_after.py: run once from a checkout of the table before, once from the one after. Not
part of the package.

    PYTHONPATH=<checkout> python lookups.py 20 21 > BEFORE.json
"""

from __future__ import annotations

import json
import sys
import warnings

import torch

from kernels.modes import Op, Reduction
from tuner.problems import Case, InputLayout

OPS = ((Op.MSE, False), (Op.L1, False), (Op.KL_DIV, False), (Op.KL_DIV, True))


def main() -> None:
    warnings.simplefilter("ignore")  # tables' notes on entries the lookup passes over
    found = {}
    for e in (int(a) for a in sys.argv[1:]):
        for op, log in OPS:
            for dtype in (torch.float32, torch.float16, torch.bfloat16):
                for red in (Reduction.NONE, Reduction.MEAN):
                    case = Case(op, dtype, (1 << e,), red, log_target=log, layout=InputLayout.TRANSPOSED)
                    g, x, t = case.inputs("cpu")
                    ex = case.phase_one(g, x, t, case.out_like(x), "cpu")
                    found[case.label()] = ex.config.to_dict()
    json.dump(found, sys.stdout, indent=1, sort_keys=True)


if __name__ == "__main__":
    main()
