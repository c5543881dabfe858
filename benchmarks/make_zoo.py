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
into benchmarks/data/zoo-sixth/ the sixth (``sixth-*``, written before the changes of stop 33),
into benchmarks/data/zoo-seventh/ the seventh (``seventh-*``, written after the sixth's
replay and before the change designed on it), into benchmarks/data/zoo-eighth/ the eighth
(``eighth-*``, hosts whose memory is modelled, written before the memory-aware prefetch of stop
34), into benchmarks/data/zoo-ninth/ the ninth (``ninth-*``, written after its second form),
into benchmarks/data/zoo-tenth/ the tenth (``tenth-*``, small-shm hosts of 6-24 cores, written
before the bound-aware start of stop 35), into benchmarks/data/zoo-eleventh/ the eleventh
(``eleventh-*``, knobs of reversed sign or unusual size, written after stop 35 landed), into
benchmarks/data/zoo-twelfth/ the twelfth (``twelfth-*``, written before stop 36's prefetch
step), into benchmarks/data/zoo-thirteenth/ the thirteenth (``thirteenth-*``, family seeds
only, drawn before stop 36's flat-workers rule), into benchmarks/data/zoo-fourteenth/ the
fourteenth (``fourteenth-*``, family seeds only, drawn before that rule's descent), into
benchmarks/data/zoo-fifteenth/ the fifteenth (``fifteenth-*``, written after stop 36 landed),
into benchmarks/data/zoo-sixteenth/ the sixteenth (``sixteenth-*``, written before stop 37's
change and not looked at while designing it), into benchmarks/data/zoo-seventeenth/ the
seventeenth (``seventeenth-*``, written after that change and before any replay of it),
into benchmarks/data/zoo-eighteenth/ the eighteenth (``eighteenth-*``, written before stop 39's
change), into benchmarks/data/zoo-nineteenth/ the nineteenth (``nineteenth-*``, written
before stop 40's settle experiment), into benchmarks/data/zoo-twentieth/ the twentieth
(``twentieth-*``, written before stop 40's change to the workers' first direction), into
benchmarks/data/zoo-twentyfirst/ the twenty-first (``twentyfirst-*``, written for a second
change of stop 40 that was dropped before it was written), into
benchmarks/data/zoo-twentysecond/ the twenty-second (``twentysecond-*``, written before a gated
form of stop 40's worker rule), into benchmarks/data/zoo-twentythird/ the twenty-third
(``twentythird-*``, noisy hosts, written after stop 41's traces of the misses at budget 14
and before any change they lead to), into benchmarks/data/zoo-twentyfourth/ the
twenty-fourth (``twentyfourth-*``, optima at either end of the batch ladder, written before
stop 42's prototypes, none of which was kept), into benchmarks/data/zoo-twentyfifth/ the
twenty-fifth (``twentyfifth-*``, near-ties for the confirmation's race, written before stop
43's replay of its race change) and into benchmarks/data/zoo-twentysixth/ the twenty-sixth
(``twentysixth-*``, hosts behind the baselines' 8 and 32 workers, written before the replay
of stop 47's change to the workers' first direction).

    .venv/bin/python benchmarks/make_zoo.py            # a few seconds
    .venv/bin/python benchmarks/make_zoo.py --set twentysecond   # one set's tables only

A new held-out set is written with ``--set NAME``: the other sets' tables stay as committed.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from bench_tabular.grid import write_table
from bench_tabular.zoo import HELD_OUT_SEEDS, HELD_OUT_SETS, held_out, table_data, zoo

HERE = Path(__file__).resolve().parent


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", type=Path, default=HERE / "data" / "zoo")
    for name in HELD_OUT_SETS:
        p.add_argument(f"--{name}-out", type=Path, default=HERE / "data" / f"zoo-{name}")
    p.add_argument("--set", default="all", choices=("all", "design", *HELD_OUT_SETS),
                   help="write only this set's tables (design: the design landscapes and "
                   "heldout-*)")  # fmt: skip
    args = p.parse_args(argv)
    sets = []
    if args.set in ("all", "design"):
        sets += [(land, args.out) for land in [*zoo(), *(held_out(s) for s in HELD_OUT_SEEDS)]]
    for name, lands in HELD_OUT_SETS.items():
        if args.set in ("all", name):
            sets += [(land, getattr(args, f"{name}_out")) for land in lands()]
    for land, folder in sets:
        data = table_data(land)
        meta = {**data["meta"], "points": data["points"]}
        path = write_table(folder / f"{land.name}.json.gz", meta, data["measurements"])
        # The held-out landscapes are written, not described: the designer does not see them.
        print(path if land.held_out else f"{path}: {land.about}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
