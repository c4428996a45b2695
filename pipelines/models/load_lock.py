"""One model load at a time in a process.

``from_pretrained`` (transformers, sentence-transformers, peft) builds a model with torch's
weight-init functions and default device swapped for the whole process, not the calling thread;
two loads in two threads (the systems and arms of ``evaluate`` start together) can leave weights
on the meta device or untied ("lm_head.weight MISSING"). Every heavy load takes this lock:

    with MODEL_LOADS:
        model = AutoModelForCausalLM.from_pretrained(folder)

It is re-entrant, so a guarded load nested inside another on the same thread cannot deadlock it.
"""

from __future__ import annotations

import threading

MODEL_LOADS = threading.RLock()
