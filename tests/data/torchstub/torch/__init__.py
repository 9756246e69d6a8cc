"""A stand-in for the torch package (tests/test_torch_fidelity.py): written
for shmcfg's tests, no PyTorch code. Like torch, importing it imports its
config modules (torch._dynamo imports its config)."""

from . import _dynamo, compiler  # noqa: F401
from ._dynamo import eval_frame  # noqa: F401
