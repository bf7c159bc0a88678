"""Vectors held back from a secure sum, as a run records and reports them.

Under secure aggregation each participant checks its own vector before masking it; one holding a
value the fixed-point sum cannot carry (NaN, inf or beyond its range: training diverged) sends
nothing and is left out exactly as a dropped participant is; when too few vectors arrive, the sum
is not released and what it was for is skipped (:mod:`abm.learning.privacy.secure_aggregation`).
:class:`WithheldRecord` turns the aggregator's :class:`~abm.learning.privacy.aggregation.WithheldSum`
entries into report.json's ``privacy.withheld`` and warns on the console; :func:`withheld_lines`
gives report.md's line.
"""

from __future__ import annotations

from typing import Any

from abm.learning import progress
from abm.learning.privacy.aggregation import WithheldSum
from abm.plurals import counted, plural


def _whom(member: str, ids: list[int]) -> str:
    return f"{plural(member, len(ids))} {', '.join(map(str, ids))}"


class WithheldRecord:
    """One protocol run's withheld vectors: ``record``, one ``{round, participants, sums,
    skipped}`` entry per round in which some participants held back a vector (rounds from 0; the
    participants that did, in order; how many of the round's sums they held back from; how many
    of those were not released, too few vectors having arrived), for report.json; and a warning
    line (:func:`abm.learning.progress.say`) for each round in which a participant (``who``:
    participant, or institution in a private calibration) first held one back, and for the first
    round with a sum not released. The run goes on."""

    def __init__(self, key: str, who: str, rounds: int) -> None:
        self.key, self.who, self.rounds = key, who, rounds
        self.record: list[dict[str, Any]] = []
        self._warned: set[int] = set()
        self._skip_warned = False

    def after_round(self, t: int, sums: list[WithheldSum]) -> None:
        """Round ``t``'s sums that vectors were held back from."""
        if not sums:
            return
        ids = sorted({pid for s in sums for pid in s.participants})
        skipped = sum(not s.released for s in sums)
        self.record.append({"round": t, "participants": ids, "sums": len(sums), "skipped": skipped})
        span = f"in round {t} (rounds 0..{self.rounds - 1})"
        first = [pid for pid in ids if pid not in self._warned]
        if first:
            self._warned.update(first)
            one = len(first) == 1
            progress.say(
                f"warning: {self.key}: {_whom(self.who, first)} held back {'its vector' if one else 'their vectors'} "
                f"from the secure sum {span}: values the sum cannot carry (NaN, inf or beyond its range: did training "
                f"diverge?), so {'it was' if one else 'they were'} left out as dropouts are; the run goes on "
                "(report.json: privacy.withheld)"
            )
        if skipped and not self._skip_warned:
            self._skip_warned = True
            progress.say(
                f"warning: {self.key}: too few vectors arrived for {counted(skipped, 'secure sum')} {span} (fewer "
                "than two, or than a DP budget can pay for): nothing was released, and what the sum would have "
                "updated (a model, dreams, soft labels) stays as it was (report.json: privacy.withheld, every round)"
            )


def withheld_lines(protocols: dict[str, Any], member: str = "participant") -> list[str]:
    """A line per protocol of a report's ``protocols`` whose participants held back vectors from
    the secure sum (``privacy.withheld``): who, in how many rounds from which, and the sums that
    were not released."""
    lines = []
    for key, r in protocols.items():
        record = (r.get("privacy") or {}).get("withheld") or []
        if not record:
            continue
        ids = sorted({pid for e in record for pid in e["participants"]})
        skipped = sum(e["skipped"] for e in record)
        rounds = [e["round"] for e in record]
        not_released = (
            f"; {counted(skipped, 'sum')} not released (too few vectors arrived): what "
            f"{'it' if skipped == 1 else 'they'} would have updated stayed as it was"
            if skipped
            else ""
        )
        lines.append(
            f"Warning: {key}: {_whom(member, ids)} held back vectors the secure sum cannot carry (NaN, inf or "
            f"beyond its range: training diverged) in {counted(len(rounds), 'round')} from round {rounds[0]}, "
            f"left out as dropouts are{not_released} (privacy.withheld in report.json)."
        )
    return lines
