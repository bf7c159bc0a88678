"""Tensors and settings in and out of Flower's legacy messages (``FitIns`` / ``FitRes``).

A client operation's payload (named tensors) travels as Flower ``Parameters`` (one NumPy array per
tensor, dtype and shape kept, so values arrive bit for bit); the operation's name, the protocol's
index in the scenario and its JSON settings travel as one string in the message's config.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import torch
from flwr.common import Parameters, ndarrays_to_parameters, parameters_to_ndarrays

CONFIG_KEY = "abm"


def encode_tensors(payload: dict[str, torch.Tensor]) -> tuple[Parameters, list[str]]:
    """Named tensors -> (Flower Parameters, names in order)."""
    names = sorted(payload)
    arrays = [payload[n].detach().cpu().contiguous().numpy() for n in names]
    return ndarrays_to_parameters(arrays), names


def decode_tensors(parameters: Parameters, names: list[str]) -> dict[str, torch.Tensor]:
    """Inverse of :func:`encode_tensors`."""
    arrays = parameters_to_ndarrays(parameters)
    if len(arrays) != len(names):
        raise ValueError(f"message carries {len(arrays)} tensors for {len(names)} names")
    return {n: torch.from_numpy(np.array(a, copy=True)) for n, a in zip(names, arrays, strict=True)}


def encode_request(
    op: str, protocol: int, payload: dict[str, torch.Tensor], config: dict[str, Any]
) -> tuple[Parameters, dict[str, str]]:
    """(Parameters, config dict) of a request to run client operation ``op``."""
    params, names = encode_tensors(payload)
    header = {"op": op, "protocol": protocol, "names": names, "config": config}
    return params, {CONFIG_KEY: json.dumps(header)}


def decode_request(parameters: Parameters, config: dict[str, Any]) -> tuple[str, int, dict[str, torch.Tensor], dict]:
    """(op, protocol index, payload, settings) of a request."""
    header = json.loads(str(config[CONFIG_KEY]))
    return header["op"], int(header["protocol"]), decode_tensors(parameters, header["names"]), header["config"]
