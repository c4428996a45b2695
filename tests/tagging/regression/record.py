"""Record ``expected.json``. It was run once, on the code before the harness move (commit 7f5e3fd);
running it again on later code would only re-record that code's outputs:

    PYTHONPATH=$PWD python -m tests.tagging.regression.record
"""

import json
import tempfile
from pathlib import Path

from pipelines.llm.client import LLMRuntime
from pipelines.tagging.config import TaggingConfig
from pipelines.tagging.run import generate_tagging
from tests.tagging.regression.scenario import EXPECTED, backend, config_data, read_outputs

if __name__ == "__main__":
    with tempfile.TemporaryDirectory() as tmp:
        cfg = TaggingConfig.model_validate(config_data(Path(tmp)))
        runtime = LLMRuntime(cfg.llm, backends={cfg.llm.default.model_dump_json(): backend()})
        metrics = generate_tagging(cfg, root=tmp, runtime=runtime)
        expected = {"metrics": metrics, **read_outputs(Path(tmp))}
    EXPECTED.write_text(json.dumps(expected, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    print(json.dumps({k: metrics["systems"][k]["overall"] for k in metrics["systems"]}), metrics["sft_rows"])
