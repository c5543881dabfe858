"""Quantities as people read them: the tool's one byte formatter (every layer's messages use
it, so it sits below them all)."""

from __future__ import annotations


def fmt_bytes(n: float | None) -> str:
    """1.5 GiB, 64.0 MiB, 512 B."""
    if n is None:
        return "n/a"
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:,.0f} {unit}" if unit == "B" else f"{n:,.1f} {unit}"
        n /= 1024
    return f"{n} B"  # pragma: no cover
