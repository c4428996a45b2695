"""Record ``expected.json``. It was run on the code before the harness move (commit 7f5e3fd), then
once more for issue 11's intended output changes (split, failure outcome, coverage) and for issue
21's (the split by question text, the semantic judge's examples, the numerical prompts); running it
again on later code only re-records that code's outputs, so do it only for an intended change:

    PYTHONPATH=$PWD python -m tests.tagging.regression.record
"""

import json
import tempfile
from pathlib import Path

from pipelines.llm.client import LLMRuntime, backend_key
from pipelines.tagging.config import TaggingConfig
from pipelines.tagging.run import generate_tagging
from tests.tagging.regression.scenario import EXPECTED, backend, config_data, portable, read_outputs

if __name__ == "__main__":
    with tempfile.TemporaryDirectory() as tmp:
        cfg = TaggingConfig.model_validate(config_data(Path(tmp)))
        runtime = LLMRuntime(cfg.llm, backends={backend_key(cfg.llm.default): backend()})
        metrics = generate_tagging(cfg, root=tmp, runtime=runtime)
        expected = portable({"metrics": metrics, **read_outputs(Path(tmp))})
    EXPECTED.write_text(json.dumps(expected, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    print(json.dumps({k: metrics["systems"][k]["overall"] for k in metrics["systems"]}), metrics["sft_rows"])
