"""The compiled kernels: which are in use, and why not.

xcep runs without a C compiler (Python does the kernels' work, several times
slower). ``xcep --version`` says which are in use, so that a slow run on a
machine where the build fell back is not a mystery.
"""

from __future__ import annotations

import importlib

KERNELS = {  # module -> what it does
    "xcep.events._tokenizer": "XML tokenizer, JSON walk and JSON Lines writer",
    "xcep.xpush._states": "XPush machine core",
    "xcep.xseq._quiet": "XSeq automaton's quiet stretches",
    "xcep.xseq._lists": "XSeq flat-sequence list reader and step function",
    "xcep.xseq._vm": "XSeq compiled automaton",
}


def kernel_status() -> dict[str, str | None]:
    """``{what it does: None if in use, else why not}``."""
    out: dict[str, str | None] = {}
    for module, what in KERNELS.items():
        try:
            importlib.import_module(module)
            out[what] = None
        except ImportError as exc:
            out[what] = f"not built ({exc.msg}): Python does its work, slower"
    return out


def describe() -> str:
    """One line per kernel, as ``xcep --version`` prints them."""
    return "\n".join(
        f"  {what}: {'compiled' if why is None else why}" for what, why in kernel_status().items()
    )


def report_missing() -> None:
    """After an install (``make``): one line per kernel that is not in use."""
    for what, why in kernel_status().items():
        if why is not None:
            print(f"xcep: {what} {why}")
