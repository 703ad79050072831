"""Generated inputs for benchmarks and tests: deterministic for a given seed."""

from __future__ import annotations

import random
from pathlib import Path

SYMBOLS = ["IBM", "MSFT", "ORCL", "AAPL", "GOOG", "AMZN", "SAP", "INTC", "CSCO", "HPQ"]


def stock_stream(path: Path, megabytes: float = 50, seed: int = 1) -> Path:
    """A flat stream of stock transactions, one endless-looking root:

    <stocks><transaction id="1" company="IBM" time="..."><symbol>IBM</symbol><price>101.25</price>
    <volume>300</volume></transaction>...</stocks>
    """
    rng = random.Random(seed)
    prices = {s: rng.uniform(20, 400) for s in SYMBOLS}
    target = int(megabytes * 1e6)
    written = 0
    with open(path, "w", encoding="utf-8") as out:
        out.write('<?xml version="1.0"?>\n<stocks>\n')
        i = 0
        while written < target:
            symbol = rng.choice(SYMBOLS)
            prices[symbol] = max(1.0, prices[symbol] * (1 + rng.gauss(0, 0.01)))
            record = (
                f'<transaction id="{i}" company="{symbol}" time="{1_700_000_000 + i}">'
                f"<symbol>{symbol}</symbol><price>{prices[symbol]:.2f}</price>"
                f"<volume>{rng.randrange(1, 100) * 100}</volume></transaction>\n"
            )
            out.write(record)
            written += len(record)
            i += 1
        out.write("</stocks>\n")
    return path
