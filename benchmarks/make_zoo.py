#!/usr/bin/env python
"""Write the landscape zoo's tables (benchmarks/bench_tabular/zoo.py) into benchmarks/data/zoo/:
one table per modelled host in the documented format (points with ``truth`` and ``noise``),
the design landscapes and the held-out ones (``heldout-*``, drawn from a randomised family
and not looked at while the sampler was designed).

    .venv/bin/python benchmarks/make_zoo.py            # a few seconds
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from bench_tabular.grid import write_table
from bench_tabular.zoo import HELD_OUT_SEEDS, held_out, table_data, zoo

HERE = Path(__file__).resolve().parent


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", type=Path, default=HERE / "data" / "zoo")
    args = p.parse_args(argv)
    for land in [*zoo(), *(held_out(s) for s in HELD_OUT_SEEDS)]:
        data = table_data(land)
        meta = {**data["meta"], "points": data["points"]}
        path = write_table(args.out / f"{land.name}.json.gz", meta, data["measurements"])
        # The held-out landscapes are written, not described: the designer does not see them.
        print(path if land.held_out else f"{path}: {land.about}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
