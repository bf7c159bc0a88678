"""A CPU run's memory against this machine's: the refusal of a run that cannot fit at all, the
note before runs that may not fit, and the allocation failures that say a run did not.

The estimate itself is :func:`abm.engine.config.estimate_memory_bytes` (measured peaks,
BENCHMARKS.md, "Peak memory of abm run"): 1.1 to 1.3 times each peak measured, at most
:data:`ESTIMATE_OVER_PEAK` times. A run whose estimate exceeds the memory available now gets a
note and goes on, since it may fit (the estimate rounds up, other programs may free memory);
only one that needs more than all of the machine's memory and swap, even at the lowest the
estimate allows, is refused (:func:`abm.scenario.check_memory`). A run on a GPU has its own
check (:func:`abm.scenario.check_device`) and gets neither here.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from abm.plurals import counted

if TYPE_CHECKING:  # abm.scenario imports this module
    from abm.scenario import Scenario
    from abm.set_options import OptionNames

MEMINFO = Path("/proc/meminfo")

# The estimate is at most this many times a run's peak (tests/test_memory.py checks it against
# each peak measured), so a run needs at least its estimate divided by it.
ESTIMATE_OVER_PEAK = 1.5

# What torch's CPU allocator says when it cannot allocate (c10/core/impl/alloc_cpu.cpp): on Linux
# "can't allocate memory" (posix_memalign failed), elsewhere "not enough memory".
CPU_ALLOCATOR_FAILURES = ("DefaultCPUAllocator: can't allocate memory", "DefaultCPUAllocator: not enough memory")


def meminfo_bytes() -> dict[str, int]:
    """/proc/meminfo's figures in bytes (``MemAvailable``, ``MemTotal``, ``SwapTotal``, ...);
    empty where it cannot be read (another system)."""
    figures: dict[str, int] = {}
    try:
        for line in MEMINFO.read_text(encoding="ascii").splitlines():
            name, _, rest = line.partition(":")
            words = rest.split()
            if len(words) == 2 and words[1] == "kB" and words[0].isdigit():
                figures[name] = int(words[0]) * 1024
    except (OSError, UnicodeDecodeError):
        return {}
    return figures


def available_memory_bytes() -> int | None:
    """The memory this machine can give a run now without swapping (Linux: ``MemAvailable`` in
    /proc/meminfo), or None where that cannot be read."""
    return meminfo_bytes().get("MemAvailable")


def total_memory_bytes() -> int | None:
    """All of this machine's memory and swap (``MemTotal`` plus ``SwapTotal``), or None where
    that cannot be read."""
    figures = meminfo_bytes()
    return figures["MemTotal"] + figures.get("SwapTotal", 0) if "MemTotal" in figures else None


def community_contacts(sc: Scenario) -> tuple[float, float]:
    """A scenario's community contacts a day, weighted by age class, and over a contact cycle
    (what :func:`abm.engine.config.estimate_memory_bytes` counts as ``community_stubs``)."""
    from abm.engine.config import AGE_CLASS_SHARES  # here: the machine's figures above need no engine

    community = sc.contacts.community
    mean = sum(s * k for s, k in zip(AGE_CLASS_SHARES, community.mean_contacts, strict=True))
    return mean, mean * community.cycle_days


def run_memory_bytes(sc: Scenario, replicates: int | None = None) -> int:
    """The estimated peak memory of one CPU run of ``sc`` (with ``replicates``, default its
    own), its community contacts counted."""
    from abm.engine.config import estimate_memory_bytes

    reps = sc.simulation.replicates if replicates is None else replicates
    return estimate_memory_bytes(sc.population.agents, reps, community_contacts(sc)[1])


def run_size(sc: Scenario, replicates: int | None = None, digits: str = ",") -> tuple[str, bool]:
    """``N agents x R replicates`` of ``sc`` (with ``replicates``, default its own; ``digits``:
    the format of N), with its community contacts where they are beyond the defaults (and
    whether they are)."""
    from abm.engine.config import DEFAULT_COMMUNITY_STUBS

    reps = sc.simulation.replicates if replicates is None else replicates
    mean, stubs = community_contacts(sc)
    more = stubs > DEFAULT_COMMUNITY_STUBS + 1e-9
    contacts = f" with {mean:.0f} community contacts a day over a {sc.contacts.community.cycle_days}-day cycle"
    return f"{sc.population.agents:{digits}} agents x {counted(reps, 'replicate')}{contacts if more else ''}", more


def memory_note(
    scenarios: Sequence[Scenario],
    *,
    replicates: int | None = None,
    runs: int = 1,
    fewer: Sequence[str] = ("replicates", "agents"),
    names: OptionNames | None = None,
) -> str | None:
    """The note (without ``note: ``) for ``runs`` CPU runs at once, each the largest of
    ``scenarios`` (a sweep's variants) with ``replicates`` (default: its own), whose estimated
    memory exceeds what this machine has available; None when they fit, when the runs are not
    on the CPU or when the available memory cannot be read. ``fewer`` names what to reduce
    (``--workers`` first when ``runs`` is more than 1); a CUDA device is suggested where torch
    sees one. Options are named as ``names`` says (``--workers 2`` or ``workers=2``; default the
    command line's)."""
    from abm.scenario import COMMAND_LINE

    names = names or COMMAND_LINE
    on_cpu = [sc for sc in scenarios if sc.simulation.device.startswith("cpu")]
    if not on_cpu:
        return None
    sc = max(on_cpu, key=lambda s: run_memory_bytes(s, replicates))
    need = runs * run_memory_bytes(sc, replicates)
    have = available_memory_bytes()
    if have is None or need <= have:
        return None
    size, contacts = run_size(sc, replicates)
    if runs > 1:
        what, they = f"{runs} runs at once ({names.given('workers', runs)}), each of {size},", "they"
        reduce = [names.name("workers"), *fewer]
    else:
        what, they, reduce = size, "the run", list(fewer)
    if contacts:
        reduce.append("community contacts")
    options = reduce[0] if len(reduce) == 1 else f"{', '.join(reduce[:-1])} or {reduce[-1]}"
    if cuda_available():
        options += f", or {names.given('device', 'cuda')}"
    return (
        f"{what} need about {math.ceil(need / 1e8) / 10:.1f} GB; this machine has {math.floor(have / 1e8) / 10:.1f} "
        f"GB available: {they} may be killed for memory (use fewer {options})"
    )


def cuda_available() -> bool:
    """Whether torch sees a CUDA device (torch is loaded here, when a note needs it)."""
    import torch

    return torch.cuda.is_available()


def cpu_allocation_failed(exc: BaseException) -> bool:
    """Whether ``exc`` says that memory could not be allocated on the CPU: Python's (NumPy's)
    ``MemoryError``, or the ``RuntimeError`` of torch's CPU allocator, known by its message (any
    other ``RuntimeError`` is not)."""
    if isinstance(exc, MemoryError):
        return True
    return isinstance(exc, RuntimeError) and any(text in str(exc) for text in CPU_ALLOCATOR_FAILURES)
