"""The cluster launch files under a real one-host Slurm (Debian's slurm-wlm and munge, CPU only):
the set-up installs the packages where it can (skipping with the reason where it cannot) and starts
a controller and a node daemon of its own; the tests submit the real sbatch files.

- Generation: build_kb as a job (the knowledge base on a Chroma server), then
  ``configs/slurm/generate_shards.sbatch`` as a 2-task array of RAM2C shards, each task starting
  its own simulated inference server through ``VLLM_SERVE`` and waiting for its health URL, then
  the merge as a job depending on the array: every job COMPLETED, each task's log names its shard,
  and the merged files equal one run's.
- Training: ``configs/slurm/train_multinode.sbatch`` with the smoke profile's SFT settings on a tiny
  Qwen2, ZeRO-2 on one CPU process with gloo (``configs/accelerate/zero2_cpu_ci.yaml``) through
  ``srun`` and ``launch_node.sh``: COMPLETED, its log shows the rank and rendezvous, the adapter is
  written.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
import yaml

from pipelines.profiles import apply_profile, load_profile
from tests.shard_checks import assert_same_outputs
from tests.support.chroma_server import ChromaServer, chroma_command, free_port
from tests.support.paper_workspace import make_workspace, paper_params, served_names, write_params
from tests.support.simserver import SimCluster
from tests.support.slurm_cluster import SlurmCluster, ensure_slurm
from tests.tiny_models import minilm_dir, tiny_qwen2

PROJECT = Path(__file__).resolve().parents[2]
VENV = Path(sys.executable).parent.parent
GENERATED, REPORTS = Path("data/generated/ram2c"), Path("reports/generate_ram2c")

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def slurm(tmp_path_factory):
    problem = ensure_slurm()
    if problem is not None:
        pytest.skip(f"no Slurm on this machine: {problem}")
    with SlurmCluster(tmp_path_factory.mktemp("slurm")) as cluster:
        yield cluster


def job_env(**extra: str) -> dict[str, str]:
    return {
        "PYTHONPATH": os.pathsep.join(filter(None, [str(PROJECT), os.environ.get("PYTHONPATH")])),
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "EDUMAS_TRACKING": "0",
        "VENV": str(VENV),
        **extra,
    }


def ram2c_params(project: Path, *, sim_url: str, chroma: ChromaServer) -> dict:
    params = paper_params(urls={team: [sim_url] for team in ("tagging", "kgc", "ram2c")}, fraction=4 / 3500)
    params["ram2c"].update(turns=1, concurrency=32)
    params["ram2c"]["n_rewrites"] = 0  # over retrieval.n_rewrites (2): the merge must fingerprint what the run used
    store = {"path": str(chroma.path), "backend": "server", "server": {"host": "127.0.0.1", "port": chroma.port}}
    params["build_kb"]["store"].update(store)
    params["build_kb"]["embedder"]["path"] = str(minilm_dir())
    return params


def read(folder: Path, name: str) -> str:
    return (folder / name).read_text(encoding="utf-8")


@pytest.mark.skipif(chroma_command() is None, reason="the chroma command (chromadb) is not installed")
def test_sharded_generation_array_then_merge_on_slurm(slurm, tmp_path):
    project = make_workspace(tmp_path / "sharded")
    port = free_port()
    with ChromaServer(tmp_path / "kb") as chroma:
        params = ram2c_params(project, sim_url=f"http://127.0.0.1:{port}/v1", chroma=chroma)
        names = served_names(params)
        write_params(project, params)
        env = job_env()
        build = slurm.sbatch(["-o", "build_kb-%j.out", "--wrap", f"{sys.executable} -m stages.build_kb"], env=env,
                             cwd=project)
        serve = f"{sys.executable} -m tests.support.simserver --port {port} --compression 200 " \
                f"--served-model-name {' '.join(names)}"
        array = slurm.sbatch(
            [f"--dependency=afterok:{build}", "--array=0-1%1", "--cpus-per-task=1", "--gpus-per-node=0",
             "--time=20", str(PROJECT / "configs/slurm/generate_shards.sbatch")],
            env=job_env(TEAM="ram2c", PARAMS="params.yaml", VLLM_SERVE=serve,
                        VLLM_HEALTH_URL=f"http://127.0.0.1:{port}/health", VLLM_WAIT_S="120"),
            cwd=project,
        )
        merge = slurm.sbatch(
            [f"--dependency=afterok:{array}", "-o", "merge-%j.out", "--wrap",
             f"{sys.executable} -m stages.merge_shards --team ram2c --params params.yaml"],
            env=env,
            cwd=project,
        )
        states = slurm.wait([build, array, merge], expect={array: 2}, timeout_s=900)
        assert states == {build: "COMPLETED", f"{array}_0": "COMPLETED", f"{array}_1": "COMPLETED",
                          merge: "COMPLETED"}, slurm.logs()
        for task in (0, 1):  # each task's log: its shard, and the summary its stage printed
            log = read(project, f"edumas-generate-{array}_{task}.out")
            assert f"edumas generate_ram2c: shard {task}/2 on {slurm.node}" in log
            assert "LLM calls per dialogue" in log and (project / f"params.shard-{task}-of-2.yaml").is_file()
            assert (project / f"data/cache/ram2c.shard-{task}-of-2.sqlite").is_file()  # a cache per task
        assert "merged 2 shards of ram2c: 4 samples" in read(project, f"merge-{merge}.out")
        assert "chunks" in read(project, f"build_kb-{build}.out")

        # one run of the same params against the same two servers, outside Slurm
        one = make_workspace(tmp_path / "one")
        write_params(one, yaml.safe_load(read(project, "params.yaml")))
        with SimCluster(servers=1, compression=200, port=port, served_model_name=names):
            from stages.generate_ram2c import main

            cwd = Path.cwd()
            os.chdir(one)
            try:
                assert main(["--params", "params.yaml"]) == 0
            finally:
                os.chdir(cwd)
    assert_same_outputs(
        one / GENERATED,
        project / GENERATED,
        byte_identical={"predictions.jsonl", "dpo.jsonl", "sft.jsonl", "dialogues.jsonl", "topics/predictions.jsonl"},
        traces={"traces.jsonl"},
    )
    metrics = json.loads(read(project / REPORTS, "metrics.json"))
    assert metrics["dialogues"] == 4 and metrics["dialogues_failed"] == 0 and metrics["pairs_kept"] >= 1


def test_training_job_with_the_smoke_profile_on_cpu(slurm, tmp_path):
    from pipelines.training.dataset_builder import MakeDatasetsConfig, build_datasets
    from pipelines.training.dataset_targets import model_targets

    model = tiny_qwen2(tmp_path / "qwen2", layers=1, hidden=32)
    build_datasets(
        MakeDatasetsConfig(
            inputs=[{"path": str(PROJECT / "data/demo/kgc/sft.jsonl"), "kind": "sft"}],
            output_dir=str(tmp_path / "train"),
            eval_fraction=0.0,
            reports_dir=str(tmp_path / "reports/make_datasets"),
        ),
        model_targets(str(model)),
    )
    base = yaml.safe_load((PROJECT / "params.yaml").read_text(encoding="utf-8"))
    sft = apply_profile(base, load_profile("smoke", root=PROJECT))["train"]["sft"]
    assert sft["schedule"]["max_steps"] == 1  # the smoke profile's
    sft.update(
        model=str(model), dataset=str(tmp_path / "train/sft"), data_card=str(tmp_path / "train/data_card.json"),
        output_dir=str(tmp_path / "run"), reports_dir=str(tmp_path / "run/reports"),
        tracking={**sft["tracking"], "report_to": "none"},
    )
    params = tmp_path / "params.yaml"
    params.write_text(yaml.safe_dump({"train": {"sft": sft}}), encoding="utf-8")
    job = slurm.sbatch(
        ["--nodes=1", "--gpus-per-node=0", "--cpus-per-task=1", "--time=20", "-o", str(tmp_path / "train-%j.out"),
         str(PROJECT / "configs/slurm/train_multinode.sbatch")],
        env=job_env(ACCELERATE_CONFIG="configs/accelerate/zero2_cpu_ci.yaml", GPUS_PER_NODE="1",
                    TRAIN_ARGS=f"--params {params} --section train.sft", MAIN_PROCESS_PORT=str(free_port()),
                    DS_ACCELERATOR="cpu", CUDA_VISIBLE_DEVICES="", OMP_NUM_THREADS="1"),
        cwd=PROJECT,
    )
    states = slurm.wait([job], timeout_s=900)
    log_path = tmp_path / f"train-{job}.out"
    log = log_path.read_text(encoding="utf-8") if log_path.exists() else ""
    assert states == {job: "COMPLETED"}, log[-4000:] + slurm.logs()
    assert "edumas train: 1 node(s) x 1 GPUs, config configs/accelerate/zero2_cpu_ci.yaml" in log
    assert f"rank 0/1, rendezvous {slurm.node}:" in log
    metrics = json.loads((tmp_path / "run/reports/metrics.json").read_text())
    assert metrics["global_step"] == 1
    assert (tmp_path / "run/final/adapter_model.safetensors").stat().st_size > 0
