"""Vectors held back from a sum, as a run records and reports them.

Each participant checks its own vector before it sends it to a sum
(:meth:`~abm.learning.privacy.aggregation.SumAggregator.carries`); one holding a value the sum
cannot carry (NaN or inf: training diverged; a finite value so large that the sum could overflow
float32; under secure aggregation a value beyond the fixed point's range) sends nothing and is left
out exactly as a dropped participant is; when too few vectors arrive, the sum is not released and
what it was for is skipped; a released sum whose aggregate would not be finite as written into
models is discarded (:func:`~abm.learning.privacy.aggregation.finite_or_discarded`).
:class:`WithheldRecord` turns the aggregator's :class:`~abm.learning.privacy.aggregation.WithheldSum`
entries into report.json's ``privacy.withheld`` and warns on the console; :func:`withheld_lines`
gives report.md's line. IPA's peers share no sum but the token: one whose training diverges on
its turn is left out of the ring's coupling from then on (a sum of kind ``token``), and is warned
of and reported in those words.
"""

from __future__ import annotations

from typing import Any

from abm.learning import progress
from abm.learning.messages import MessageKind
from abm.learning.privacy.aggregation import WithheldSum
from abm.plurals import counted, plural

TOKEN = MessageKind.TOKEN.value  # what IPA's peers share


def _whom(member: str, ids: list[int]) -> str:
    return f"{plural(member, len(ids))} {', '.join(map(str, ids))}"


def _sum_and_values(secure: bool) -> tuple[str, str]:
    """What the vectors were for (the secure sum or the sum) and which values it cannot carry."""
    if secure:
        return "secure sum", "values the sum cannot carry (NaN, inf or beyond its range"
    return "sum", "values the sum cannot carry (NaN, inf, or so large the sum could overflow"


class WithheldRecord:
    """One protocol run's withheld vectors: ``record``, one ``{round, participants, sums,
    skipped, discarded}`` entry per round in which some participants held back a vector or an
    aggregate was discarded (rounds from 0; the participants that held one back, in order; how
    many of the round's sums that concerns; how many of those were not released, too few vectors
    having arrived; how many were released but what they would have been written as was not
    finite, so it was discarded: :meth:`~abm.learning.privacy.aggregation.SumAggregator.discard`),
    for report.json; and a warning line (:func:`abm.learning.progress.say`) for each round in
    which a participant (``who``: participant, or institution in a private calibration) first held
    one back, for the first round with a sum not released and for the first with an aggregate
    discarded (``secure``: the sums are secure ones). The run goes on."""

    def __init__(self, key: str, who: str, rounds: int, secure: bool) -> None:
        self.key, self.who, self.rounds, self.secure = key, who, rounds, secure
        self.record: list[dict[str, Any]] = []
        self._warned: set[int] = set()
        self._skip_warned = False
        self._discard_warned = False

    def after_round(self, t: int, sums: list[WithheldSum]) -> None:
        """Round ``t``'s sums that vectors were held back from."""
        if not sums:
            return
        ids = sorted({pid for s in sums for pid in s.participants})
        discarded = sum(not s.released and not s.participants for s in sums)
        skipped = sum(not s.released for s in sums) - discarded
        self.record.append(
            {"round": t, "participants": ids, "sums": len(sums), "skipped": skipped, "discarded": discarded}
        )
        span = f"in round {t} (rounds 0..{self.rounds - 1})"
        first = [pid for pid in ids if pid not in self._warned]
        what, values = _sum_and_values(self.secure)
        if first and all(s.kind == TOKEN for s in sums):
            self._warned.update(first)
            one = len(first) == 1
            progress.say(
                f"warning: {self.key}: {_whom(self.who, first)} diverged on {'its turn' if one else 'their turns'} "
                f"{span} (a training loss or parameters not finite: too high a learning rate?), so "
                f"{'it was' if one else 'they were'} left out of the ring's coupling from then on, "
                f"{'its own model as it was' if one else 'their own models as they were'}; the run goes on "
                "(report.json: privacy.withheld)"
            )
        elif first:
            self._warned.update(first)
            one = len(first) == 1
            progress.say(
                f"warning: {self.key}: {_whom(self.who, first)} held back {'its vector' if one else 'their vectors'} "
                f"from the {what} {span}: {values}: did training diverge?), so {'it was' if one else 'they were'} "
                "left out as dropouts are; the run goes on (report.json: privacy.withheld)"
            )
        if skipped and not self._skip_warned:
            self._skip_warned = True
            fewer = "fewer than two, or than" if self.secure else "none, or fewer than"
            progress.say(
                f"warning: {self.key}: too few vectors arrived for {counted(skipped, what)} {span} ({fewer} "
                "a DP budget can pay for): nothing was released, and what the sum would have "
                "updated (a model, dreams, soft labels) stays as it was (report.json: privacy.withheld, every round)"
            )
        if discarded and not self._discard_warned:
            self._discard_warned = True
            progress.say(
                f"warning: {self.key}: what {counted(discarded, what)} {span} would have been written as was not "
                "finite (a finite sum scaled past float32's range: a server_lr or meta_lr above 1 on a huge "
                "update?), so it was discarded, and what it would have updated (the global model, the generator) "
                "stays as it was (report.json: privacy.withheld, every round)"
            )


def withheld_lines(protocols: dict[str, Any], member: str = "participant") -> list[str]:
    """A line per protocol of a report's ``protocols`` whose participants held back vectors from
    a sum (``privacy.withheld``; the secure sum under ``privacy.secure_aggregation``): who, in how
    many rounds from which, and the sums that were not released."""
    lines = []
    for key, r in protocols.items():
        privacy = r.get("privacy") or {}
        record = privacy.get("withheld") or []
        if not record:
            continue
        if r.get("protocol") == "ipa":  # the token's coupling, not a sum
            lines.append(_left_out_line(key, record, member))
            continue
        secure = bool(privacy.get("secure_aggregation"))
        vectors = (
            "vectors the secure sum cannot carry (NaN, inf or beyond its range"
            if secure
            else "vectors the sum cannot carry (NaN, inf, or so large the sum could overflow"
        )
        ids = sorted({pid for e in record for pid in e["participants"]})
        skipped = sum(e["skipped"] for e in record)
        rounds = [e["round"] for e in record if e["participants"]]
        parts = []
        if ids:
            not_released = (
                f"; {counted(skipped, 'sum')} not released (too few vectors arrived): what "
                f"{'it' if skipped == 1 else 'they'} would have updated stayed as it was"
                if skipped
                else ""
            )
            parts.append(
                f"{_whom(member, ids)} held back {vectors}: training diverged) in "
                f"{counted(len(rounds), 'round')} from round {rounds[0]}, left out as dropouts are{not_released}"
            )
        discards = [e for e in record if e.get("discarded")]
        if discards:
            count = sum(e["discarded"] for e in discards)
            parts.append(
                f"{counted(count, 'aggregate')} not finite from round {discards[0]['round']} (a finite sum scaled "
                f"past float32's range), discarded: what {'it' if count == 1 else 'they'} would have updated "
                "stayed as it was"
            )
        lines.append(f"Warning: {key}: {'; '.join(parts)} (privacy.withheld in report.json).")
    return lines


def _left_out_line(key: str, record: list[dict[str, Any]], member: str) -> str:
    """report.md's line for IPA's peers left out of the ring's coupling: who, from which round."""
    by_round: dict[int, list[int]] = {}
    for entry in record:
        by_round.setdefault(entry["round"], []).extend(entry["participants"])
    whom = "; ".join(f"{_whom(member, sorted(ids))} from round {t}" for t, ids in sorted(by_round.items()))
    return (
        f"Warning: {key}: training diverged on a turn (a loss or parameters not finite) for {whom}: left out of "
        "the ring's coupling from then on, their own models as they were (privacy.withheld in report.json)."
    )
