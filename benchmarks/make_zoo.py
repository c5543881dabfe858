#!/usr/bin/env python
"""Write the landscape zoo's tables (benchmarks/bench_tabular/zoo.py) into benchmarks/data/zoo/:
one table per modelled host in the documented format (points with ``truth`` and ``noise``),
the design landscapes and the held-out ones (``heldout-*``, drawn from a randomised family
and not looked at while the host-aware search was designed), and into
benchmarks/data/zoo-unseen/ the second held-out set (``unseen-*``: new host shapes and new
seeds of the family, written before the default sampler's redesign and replayed only for its
final figures), into benchmarks/data/zoo-fresh/ the third (``fresh-*``, written before the
changes of stop 30, replayed only for their final figures), into benchmarks/data/zoo-reserve/
the fourth (``reserve-*``, written before the changes of stop 31), into
benchmarks/data/zoo-spare/ the fifth (``spare-*``, written before the changes of stop 32),
into benchmarks/data/zoo-sixth/ the sixth (``sixth-*``, written before the changes of stop 33)
and into benchmarks/data/zoo-seventh/ the seventh (``seventh-*``, written after the sixth's
replay and before the change designed on it).

    .venv/bin/python benchmarks/make_zoo.py            # a few seconds
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from bench_tabular.grid import write_table
from bench_tabular.zoo import (
    HELD_OUT_SEEDS,
    fresh,
    held_out,
    reserve,
    seventh,
    sixth,
    spare,
    table_data,
    unseen,
    zoo,
)

HERE = Path(__file__).resolve().parent


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", type=Path, default=HERE / "data" / "zoo")
    p.add_argument("--unseen-out", type=Path, default=HERE / "data" / "zoo-unseen")
    p.add_argument("--fresh-out", type=Path, default=HERE / "data" / "zoo-fresh")
    p.add_argument("--reserve-out", type=Path, default=HERE / "data" / "zoo-reserve")
    p.add_argument("--spare-out", type=Path, default=HERE / "data" / "zoo-spare")
    p.add_argument("--sixth-out", type=Path, default=HERE / "data" / "zoo-sixth")
    p.add_argument("--seventh-out", type=Path, default=HERE / "data" / "zoo-seventh")
    args = p.parse_args(argv)
    sets = [(land, args.out) for land in [*zoo(), *(held_out(s) for s in HELD_OUT_SEEDS)]]
    sets += [(land, args.unseen_out) for land in unseen()]
    sets += [(land, args.fresh_out) for land in fresh()]
    sets += [(land, args.reserve_out) for land in reserve()]
    sets += [(land, args.spare_out) for land in spare()]
    sets += [(land, args.sixth_out) for land in sixth()]
    sets += [(land, args.seventh_out) for land in seventh()]
    for land, folder in sets:
        data = table_data(land)
        meta = {**data["meta"], "points": data["points"]}
        path = write_table(folder / f"{land.name}.json.gz", meta, data["measurements"])
        # The held-out landscapes are written, not described: the designer does not see them.
        print(path if land.held_out else f"{path}: {land.about}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
