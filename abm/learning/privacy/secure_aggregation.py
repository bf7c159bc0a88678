"""Secure aggregation with pairwise additive masks (Bonawitz et al. 2017, without self-masks).

* Each participant holds an X25519 key pair and publishes its public key through the server.
* For a pair (i, j) and a round r, both derive the same seed by X25519 key agreement followed by
  HKDF-SHA256 (info binds the round and the pair); the seed keys a Philox PRG that draws a mask
  vector of uint64 values.
* Vectors are encoded in fixed point (``frac_bits``) as integers modulo 2^64; participant i sends
  ``q_i + sum_{j>i} m_ij - sum_{j<i} m_ij``. The masks cancel in the sum, so the server learns
  only the total, which equals the plain sum up to the fixed-point rounding (2^-frac_bits per
  participant and element).
* Dropout: if some participants never send their masked vector, the server asks every survivor
  for its pair seeds with the dropped ones (a recovery request naming them) and removes those
  masks. If a survivor fails to answer, :class:`SecureAggregationError` is raised: the round fails
  loudly rather than returning a wrong sum. If fewer than ``threshold`` survivors remain (or fewer
  than the caller's ``quorum``), the server asks for no seeds and releases nothing (``aggregate``
  returns ``None``): a sum of one would be that participant's vector. A dropped participant's late
  vector is refused (this simplified scheme has no self-masks, so it must not be accepted after
  recovery).
* Range: the fixed-point sum of all members' vectors must fit the signed 64-bit range
  (|x| < 2^(63 - frac_bits) / members) or the modular sum wraps (NaN and infinity would become
  -2^(63 - frac_bits)) and differs from the plain sum. Each participant checks its own vector
  before masking it (:meth:`SecureSum.carries`); one that holds a value out of range or not finite
  (training diverged) sends nothing and is recovered from exactly as a dropped participant is, so
  the server learns only that its vector did not arrive. :meth:`SecureSum.mask` refuses such a vector
  (:class:`SecureAggregationError`) as a last guard.
* Messages: every exchange is a message on the run's network (so the byte ledger and an auditing
  network see it): ``public_key`` (each participant's key to the server and the server's relay to
  every other participant, once, in the round of the first aggregation), ``masked_vector`` (a
  survivor's masked vector, 8 bytes a value) and, after a dropout, ``recovery_request`` (server to
  each survivor: the dropped ids) and ``mask_seed`` (a survivor's 32-byte pair seed with each
  dropped participant). The pair seeds themselves come from key agreement and never travel. In
  process one object does every participant's masking (it holds every private key); that is the
  simulation's shortcut, not something the server receives.
"""

from __future__ import annotations

import hashlib

import numpy as np
import torch
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric.x25519 import (
    X25519PrivateKey,
    X25519PublicKey,
)
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from abm.learning.errors import SecureAggregationError
from abm.learning.messages import SERVER, Message, MessageKind, Network
from abm.learning.privacy.aggregation import SumAggregator

_RAW = serialization.Encoding.Raw
_RAW_PUB = serialization.PublicFormat.Raw


def _private_key(seed: int, pid: int) -> X25519PrivateKey:
    """Deterministic key from (seed, pid) so whole runs are reproducible."""
    material = hashlib.sha256(f"abm-secagg-key/{seed}/{pid}".encode()).digest()
    return X25519PrivateKey.from_private_bytes(material)


def pair_seed(private: X25519PrivateKey, peer_public: X25519PublicKey, i: int, j: int, r: int) -> bytes:
    """32-byte seed shared by i and j for round r: HKDF-SHA256 over the X25519 shared secret."""
    shared = private.exchange(peer_public)
    lo, hi = min(i, j), max(i, j)
    return HKDF(
        algorithm=hashes.SHA256(),
        length=32,
        salt=None,
        info=f"abm-mask/{r}/{lo}/{hi}".encode(),
    ).derive(shared)


def mask_from_seed(seed: bytes, size: int) -> np.ndarray:
    """A uint64 mask vector drawn by a Philox PRG keyed by ``seed``."""
    key = int.from_bytes(seed[:16], "little")
    counter = int.from_bytes(seed[16:], "little")
    bitgen = np.random.Philox(key=key, counter=counter)
    return np.random.Generator(bitgen).integers(0, 2**64, size=size, dtype=np.uint64, endpoint=False)


class SecureSum(SumAggregator):
    """Pairwise-masked sum; see the module docstring."""

    secure = True

    def __init__(
        self,
        participant_ids: list[int],
        seed: int,
        frac_bits: int = 24,
        threshold: int = 2,
    ) -> None:
        self.ids = sorted(participant_ids)
        self.frac_bits = frac_bits
        self.threshold = threshold
        self._keys = {pid: _private_key(seed, pid) for pid in self.ids}
        self._public: dict[int, X25519PublicKey] = {}
        self.last_masked: dict[int, np.ndarray] = {}
        self.recovery_failures: frozenset[int] = frozenset()
        self._keys_sent = False
        self.calls = 0  # aggregation sequence number, shared knowledge in a synchronous protocol

    def _advertise_keys(self, network: Network, round_: int) -> None:
        """Every participant's public key to the server, and on to every other participant, in the
        round of the first aggregation (the key agreement itself needs no further message)."""
        for pid in self.ids:
            pub = self._keys[pid].public_key()
            raw = torch.frombuffer(bytearray(pub.public_bytes(_RAW, _RAW_PUB)), dtype=torch.uint8)
            network.send(Message(MessageKind.PUBLIC_KEY, pid, SERVER, {"key": raw}, round_))
            # the server relays every key to every other participant
            for other in self.ids:
                if other != pid:
                    network.send(Message(MessageKind.PUBLIC_KEY, SERVER, other, {"key": raw}, round_))
            self._public[pid] = pub
        self._keys_sent = True

    def encode(self, vec: torch.Tensor) -> np.ndarray:
        """Fixed-point encoding modulo 2^64."""
        q = np.round(vec.detach().double().numpy() * (1 << self.frac_bits)).astype(np.int64)
        return q.view(np.uint64)

    def decode(self, total: np.ndarray) -> torch.Tensor:
        """Inverse of :meth:`encode` for a sum."""
        return torch.from_numpy(total.view(np.int64).astype(np.float64) / (1 << self.frac_bits)).float()

    def limit(self, members: int) -> float:
        """The magnitude every value must stay below for the fixed-point sum of ``members`` vectors
        not to wrap modulo 2^64."""
        return 2.0 ** (63 - self.frac_bits) / members

    def _first_bad(self, vec: torch.Tensor, members: int) -> int | None:
        """The index of the first value of ``vec`` the sum of ``members`` vectors cannot carry."""
        x = vec.detach().double().reshape(-1)
        bad = ~torch.isfinite(x) | (x.abs() >= self.limit(members))
        return int(bad.nonzero()[0]) if bool(bad.any()) else None

    def carries(self, vec: torch.Tensor, members: int) -> bool:
        """Whether every value of ``vec`` is finite and small enough that the fixed-point sum of
        ``members`` such vectors cannot wrap: a participant's own check before it masks its vector."""
        return self._first_bad(vec, members) is None

    def check_range(self, pid: int, vec: torch.Tensor, members: int, seq: int) -> None:
        """Raise :class:`SecureAggregationError` unless :meth:`carries` ``vec``."""
        k = self._first_bad(vec, members)
        if k is not None:
            value = float(vec.detach().double().reshape(-1)[k])
            raise SecureAggregationError(
                f"aggregation {seq}: participant {pid}'s vector has value {value} at index {k}; secure aggregation "
                f"sums finite values below {self.limit(members):g} in magnitude ({members} participants, "
                f"{self.frac_bits} fractional bits), so it cannot be masked (it is withheld, as a dropout)"
            )

    def _pair_mask(self, i: int, j: int, r: int, size: int) -> np.ndarray:
        return mask_from_seed(pair_seed(self._keys[i], self._public[j], i, j, r), size)

    def mask(self, pid: int, vec: torch.Tensor, r: int, members: list[int]) -> np.ndarray:
        """Participant ``pid``'s masked vector for aggregation number ``r`` among ``members``;
        :class:`SecureAggregationError` if the sum cannot carry ``vec`` (:meth:`check_range`)."""
        self.check_range(pid, vec, len(members), r)
        y = self.encode(vec)
        with np.errstate(over="ignore"):
            for j in members:
                if j == pid:
                    continue
                m = self._pair_mask(pid, j, r, y.size)
                y = y + m if j > pid else y - m
        return y

    def aggregate(
        self,
        contributions: dict[int, torch.Tensor],
        round_: int,
        network: Network,
        kind: MessageKind = MessageKind.MODEL_UPDATE,
        dropped: frozenset[int] = frozenset(),
        quorum: int = 1,
    ) -> torch.Tensor | None:
        if not self._keys_sent:
            self._advertise_keys(network, round_)
        seq = self.calls
        self.calls += 1
        members = sorted(contributions)
        unknown = set(members) - set(self.ids)
        if unknown:
            raise SecureAggregationError(f"participants {sorted(unknown)} have no registered key")
        # each participant's own check, before it masks anything: a vector the sum cannot carry
        # is not sent, and its sender is recovered from as a dropped participant is
        self.screen(contributions, dropped)
        lost = sorted((dropped & set(members)) | self.withheld())
        survivors = [p for p in members if p not in lost]
        size = int(next(iter(contributions.values())).numel())
        total = np.zeros(size, dtype=np.uint64)
        self.last_masked = {}
        with np.errstate(over="ignore"):
            for pid in survivors:
                y = self.mask(pid, contributions[pid], seq, members)
                self.last_masked[pid] = y
                network.send(
                    Message(
                        MessageKind.MASKED_VECTOR,
                        pid,
                        SERVER,
                        {"y": torch.from_numpy(y.view(np.int64))},
                        round_,
                    )
                )
                total = total + y
            released = len(survivors) >= max(self.threshold, quorum)
            self.note_withheld(round_, kind, released)
            if not released:  # too few arrived: the server asks for no seeds and releases nothing
                return None
            if lost:
                total = self._recover(total, survivors, lost, seq, round_, size, network)
        return self.decode(total)

    def _recover(
        self,
        total: np.ndarray,
        survivors: list[int],
        lost: list[int],
        seq: int,
        r: int,
        size: int,
        network: Network,
    ) -> np.ndarray:
        """Remove the masks that survivors share with dropped participants: the server names the
        dropped participants to every survivor (a recovery request), and each survivor answers with
        its pair seed with each of them."""
        request = torch.tensor(lost, dtype=torch.int64)
        for i in survivors:
            network.send(Message(MessageKind.RECOVERY_REQUEST, SERVER, i, {"dropped": request}, r))
        for i in survivors:
            if i in self.recovery_failures:
                raise SecureAggregationError(
                    f"round {r}: participant {i} did not answer the recovery request for dropped "
                    f"participants {lost}; the sum cannot be unmasked"
                )
            for j in lost:
                seed = pair_seed(self._keys[i], self._public[j], i, j, seq)
                network.send(
                    Message(
                        MessageKind.MASK_SEED,
                        i,
                        SERVER,
                        {"seed": torch.frombuffer(bytearray(seed), dtype=torch.uint8)},
                        r,
                    )
                )
                m = mask_from_seed(seed, size)
                total = total - m if j > i else total + m
        return total
