"""Python client of trainq, a GPU-aware queue for deep-learning training jobs (docs/python.md).

    import trainq
    q = trainq.Client()
    job = q.wait(q.submit(["python", "train.py"], mem="20GiB"))

Standard library only, Python 3.8 to 3.12. The client lives in trainq.client, the errors in
trainq.errors, the in-script GPU gate (`with trainq.gpu(mem="20GiB") as g:`) in trainq.gate.
"""

from .client import TERMINAL_STATES, Client
from .errors import Invalid, NotAllowed, NotFound, Timeout, TrainqError, Unavailable
from .gate import Gate, OutOfMemory, gpu

__version__ = "0.1.0"

__all__ = ["Client", "TERMINAL_STATES", "TrainqError", "Invalid", "NotFound", "NotAllowed",
           "Unavailable", "Timeout", "gpu", "Gate", "OutOfMemory"]
