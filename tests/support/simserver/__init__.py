"""A simulated OpenAI-compatible inference cluster (tests and benchmarks only, never the product).

- :mod:`.engine`: the vLLM-like timing model in virtual time (:class:`EngineModel`, :class:`VirtualEngine`);
- :mod:`.completion`: the reply to a chat body, valid for its JSON schema, with usage (:class:`Completer`);
- :mod:`.schema_sample`: a random instance of a JSON schema;
- :mod:`.server`: the HTTP server (:class:`SimServer`), faults, request log, stats;
- :mod:`.batches`: the provider batch API (files, batches, output and error files) with delays and faults;
- :mod:`.cluster`: several servers in a process of their own (:class:`SimCluster`, the command line).

docs/scale.md describes the model and the published figures its defaults come from.
"""

from tests.support.simserver.batches import BatchAPI, BatchFaults
from tests.support.simserver.cluster import SimCluster
from tests.support.simserver.engine import EngineModel, VirtualEngine
from tests.support.simserver.server import Faults, SimServer

__all__ = ["BatchAPI", "BatchFaults", "EngineModel", "Faults", "SimCluster", "SimServer", "VirtualEngine"]
