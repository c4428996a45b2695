"""Every shipped accelerate / DeepSpeed config is launchable, and the launch helpers build the right commands.

Config checks: accelerate's own loader parses each YAML, it points at an existing DeepSpeed JSON, and
that JSON survives HF's "auto" filling plus DeepSpeed's ``DeepSpeedConfig`` at the YAML's world size.
Slurm: the sbatch file and node launcher pass ``bash -n``, carry no unfilled placeholders, and the
launcher, run under a faked Slurm environment, prints the expected per-node ``accelerate launch``.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("deepspeed")

from pipelines.training.distributed import (  # noqa: E402
    CONFIGS,
    PROJECT_ROOT,
    DistributedConfigError,
    TrainerValues,
    accelerate_configs,
    deepspeed_configs,
    fill_auto_values,
    launch_command,
    load_accelerate_config,
    validate_all,
    validate_deepspeed_config,
)

ACCELERATE_YAMLS = accelerate_configs()
DEEPSPEED_JSONS = deepspeed_configs()
SLURM = CONFIGS / "slurm"


def test_the_expected_config_matrix_ships():
    names = {p.stem for p in ACCELERATE_YAMLS}
    for variant in ("zero2", "zero2_offload", "zero3", "zero3_offload"):
        assert f"{variant}_8gpu" in names and f"{variant}_multinode" in names
        assert (CONFIGS / "deepspeed" / f"{variant}.json").is_file()
    assert "zero2_cpu_ci" in names


@pytest.mark.parametrize("path", ACCELERATE_YAMLS, ids=lambda p: p.stem)
def test_accelerate_config_is_launchable(path: Path):
    launch = load_accelerate_config(path)
    assert launch.deepspeed_config_file.is_file()
    assert launch.num_processes % launch.num_machines == 0
    if path.stem.endswith("_8gpu"):
        assert (launch.num_machines, launch.num_processes) == (1, 8)
    if path.stem.endswith("_multinode"):
        assert launch.num_machines >= 2 and launch.processes_per_machine == 8
        assert launch.multinode_launcher == "standard"
    # the YAML's name says which JSON it launches
    variant = path.stem.rsplit("_", 1)[0]
    if variant in {"zero2", "zero2_offload", "zero3", "zero3_offload"}:
        assert launch.deepspeed_config_file.stem == variant
        assert launch.zero3_init_flag == (True if variant.startswith("zero3") else None)
    # and its DeepSpeed JSON is valid at exactly this world size
    ds = validate_deepspeed_config(launch.deepspeed_config_file, TrainerValues(world_size=launch.num_processes))
    assert ds.world_size == launch.num_processes
    assert ds.train_batch_size == 4 * 4 * launch.num_processes


@pytest.mark.parametrize("path", DEEPSPEED_JSONS, ids=lambda p: p.stem)
@pytest.mark.parametrize("world_size", [1, 8, 32])
def test_deepspeed_config_is_accepted_after_hf_fills_auto(path: Path, world_size: int):
    raw = json.loads(path.read_text())
    values = TrainerValues(world_size=world_size, per_device_train_batch_size=2, gradient_accumulation_steps=8)
    ds = validate_deepspeed_config(path, values)
    stage = raw["zero_optimization"]["stage"]
    assert ds.zero_optimization_stage == stage
    assert ds.train_micro_batch_size_per_gpu == 2
    assert ds.gradient_accumulation_steps == 8
    assert ds.train_batch_size == 2 * 8 * world_size
    assert ds.gradient_clipping == 1.0
    assert ds.bfloat16_config.enabled and not ds.float16_config.enabled
    offload = "offload" in path.stem
    assert ds.zero_config.offload_optimizer is not None if offload else ds.zero_config.offload_optimizer is None
    if stage == 3:
        assert ds.zero_config.gather_16bit_weights_on_model_save
        assert (ds.zero_config.offload_param is not None) == offload
    if offload:
        # ZeRO-Offload needs DeepSpeed's own optimizer (DeepSpeedCPUAdam); HF fills its hyper-parameters
        assert raw["optimizer"]["type"] == "AdamW"


@pytest.mark.parametrize("path", DEEPSPEED_JSONS, ids=lambda p: p.stem)
def test_auto_values_follow_the_training_arguments(path: Path):
    values = TrainerValues(learning_rate=3e-4, weight_decay=0.1, bf16=False, fp16=True, hidden_size=64)
    filled = fill_auto_values(path, values)
    assert filled["fp16"]["enabled"] is True and filled["bf16"]["enabled"] is False
    assert filled["zero_optimization"]["reduce_bucket_size"] == 64 * 64
    if "optimizer" in filled:
        assert filled["optimizer"]["params"]["lr"] == 3e-4
        assert filled["optimizer"]["params"]["weight_decay"] == 0.1
    if filled["zero_optimization"]["stage"] == 3:
        assert filled["zero_optimization"]["stage3_param_persistence_threshold"] == 640
    # filling left the HF global ZeRO-3 switch off (it would change how every later model loads)
    from transformers.integrations.deepspeed import is_deepspeed_zero3_enabled

    assert not is_deepspeed_zero3_enabled()


def test_a_contradicting_value_is_refused(tmp_path: Path):
    raw = json.loads((CONFIGS / "deepspeed" / "zero2.json").read_text())
    raw["train_micro_batch_size_per_gpu"] = 16  # TrainerValues says 4
    with pytest.raises(ValueError, match="train_micro_batch_size_per_gpu"):
        validate_deepspeed_config(raw)


def test_a_broken_deepspeed_config_is_refused_by_deepspeed():
    raw = json.loads((CONFIGS / "deepspeed" / "zero2.json").read_text())
    raw["zero_optimization"]["overlap_comms"] = True  # typo: DeepSpeed forbids unknown ZeRO keys
    with pytest.raises(Exception, match="overlap_comms"):
        validate_deepspeed_config(raw)


def test_an_auto_hf_cannot_fill_is_refused():
    raw = json.loads((CONFIGS / "deepspeed" / "zero2.json").read_text())
    raw["zero_optimization"]["allgather_bucket_size"] = "auto"
    with pytest.raises(ValueError, match="allgather_bucket_size"):
        validate_deepspeed_config(raw)


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        ({"distributed_type": "MULTI_GPU"}, "set it to DEEPSPEED"),
        ({"mixed_precision": "bf16"}, "mixed_precision"),
        ({"num_machines": 3, "num_processes": 16}, "multiple of num_machines"),
        ({"deepspeed_config": {"deepspeed_config_file": "configs/deepspeed/nope.json"}}, "does not exist"),
        (
            {"deepspeed_config": {"deepspeed_config_file": "configs/deepspeed/zero2.json", "zero_stage": 3}},
            "['zero_stage']",
        ),
        ({"num_machines": 2, "num_processes": 16}, "deepspeed_multinode_launcher: standard"),
        ({"bogus_key": 1}, "unknown keys"),
    ],
)
def test_broken_accelerate_configs_name_the_fix(tmp_path: Path, edit: dict, message: str):
    import yaml

    data = yaml.safe_load((CONFIGS / "accelerate" / "zero2_8gpu.yaml").read_text())
    data.update(edit)
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(DistributedConfigError, match=re.escape(message)) as info:
        load_accelerate_config(path)
    assert str(path) in str(info.value)


def test_validate_all_reports_every_file():
    lines = validate_all()
    assert len(lines) == len(ACCELERATE_YAMLS)  # every JSON is used by some YAML
    assert all(line.startswith("ok ") for line in lines)
    assert any("2 node(s) x 8 process(es), ZeRO-3" in line for line in lines)


def test_single_node_command():
    cmd = launch_command("configs/accelerate/zero2_8gpu.yaml", ["--params", "p.yaml"])
    assert cmd == [
        "accelerate",
        "launch",
        "--config_file",
        "configs/accelerate/zero2_8gpu.yaml",
        "-m",
        "stages.train",
        "--params",
        "p.yaml",
    ]


def test_multi_node_command_counts_total_processes():
    cmd = launch_command(
        CONFIGS / "accelerate" / "zero3_multinode.yaml",
        ["--params", "params.yaml"],
        num_machines=4,
        machine_rank=2,
        main_process_ip="gpu-node-01",
        main_process_port=29600,
    )
    text = shlex.join(cmd)
    assert "--num_machines 4 --machine_rank 2 --main_process_ip gpu-node-01" in text
    assert "--num_processes 32" in text  # 8 per node from the YAML, total over 4 nodes
    assert "--main_process_port 29600" in text
    assert text.endswith("-m stages.train --params params.yaml")
    with pytest.raises(ValueError, match="main_process_ip"):
        launch_command("x.yaml", num_machines=2, processes_per_machine=8)
    with pytest.raises(ValueError, match="machine_rank"):
        launch_command("x.yaml", num_machines=2, machine_rank=2, main_process_ip="a", processes_per_machine=8)


def test_accelerate_parses_the_built_command():
    """accelerate's own argument parser reads our command the way we mean it."""
    from accelerate.commands.launch import launch_command_parser

    cmd = launch_command(
        "configs/accelerate/zero2_multinode.yaml",
        ["--params", "params.yaml", "--section", "train"],
        num_machines=2,
        machine_rank=1,
        main_process_ip="10.0.0.1",
        processes_per_machine=8,
    )
    args = launch_command_parser().parse_args(cmd[2:])
    assert (args.num_machines, args.num_processes, args.machine_rank) == (2, 16, 1)
    assert args.main_process_ip == "10.0.0.1" and args.module
    assert args.training_script == "stages.train"
    assert args.training_script_args == ["--params", "params.yaml", "--section", "train"]


@pytest.mark.parametrize("name", ["train_multinode.sbatch", "launch_node.sh"])
def test_slurm_scripts_parse_and_have_no_placeholders(name: str):
    path = SLURM / name
    subprocess.run(["bash", "-n", str(path)], check=True)
    text = path.read_text()
    for placeholder in ("{{", "}}", "<YOUR", "CHANGEME", "TODO", "XXX"):
        assert placeholder not in text, f"{name} contains {placeholder!r}"
    if name.endswith(".sbatch"):
        directives = dict(
            re.match(r"#SBATCH --([\w-]+)(?:=(.*))?", line).groups()
            for line in text.splitlines()
            if line.startswith("#SBATCH")
        )
        assert directives["gpus-per-node"] == "8" and directives["ntasks-per-node"] == "1"
        assert int(directives["nodes"]) >= 2
        assert "configs/slurm/launch_node.sh" in text
        referenced = re.search(r"ACCELERATE_CONFIG:-([^}]+)}", text).group(1)
        assert (PROJECT_ROOT / referenced).is_file()


def test_node_launcher_builds_the_per_node_command(tmp_path: Path):
    """Run launch_node.sh as Slurm would on node 1 of 3 (scontrol faked), in dry-run mode."""
    fake_bin = tmp_path / "bin"
    fake_bin.mkdir()
    scontrol = fake_bin / "scontrol"
    # what `scontrol show hostnames gpu[07-09]` prints
    scontrol.write_text('#!/bin/bash\n[ "$1 $2" = "show hostnames" ] && printf "gpu07\\ngpu08\\ngpu09\\n"\n')
    scontrol.chmod(0o755)
    env = {
        **os.environ,
        "PATH": f"{fake_bin}:{Path(sys.executable).parent}:{os.environ['PATH']}",
        "SLURM_NODEID": "1",
        "SLURM_NNODES": "3",
        "SLURM_JOB_NODELIST": "gpu[07-09]",
        "ACCELERATE_CONFIG": "configs/accelerate/zero2_multinode.yaml",
        "TRAIN_ARGS": "--params params.yaml --section train",
        "MAIN_PROCESS_PORT": "29555",
        "VENV": str(Path(sys.executable).parent.parent),
        "DRY_RUN": "1",
    }
    done = subprocess.run(
        ["bash", str(SLURM / "launch_node.sh")], cwd=PROJECT_ROOT, env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    cmd = shlex.split(done.stdout.strip().splitlines()[-1])
    assert cmd[:4] == ["accelerate", "launch", "--config_file", "configs/accelerate/zero2_multinode.yaml"]
    text = shlex.join(cmd)
    assert "--num_machines 3 --machine_rank 1 --main_process_ip gpu07" in text
    assert "--num_processes 24" in text and "--main_process_port 29555" in text
    assert text.endswith("-m stages.train --params params.yaml --section train")


def test_node_launcher_refuses_to_run_outside_slurm():
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}
    done = subprocess.run(
        ["bash", str(SLURM / "launch_node.sh")], cwd=PROJECT_ROOT, env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode != 0 and "SLURM_NODEID" in done.stderr


def test_node_launcher_expands_possibly_empty_arrays_the_old_bash_way():
    """bash 4.3 and older (still on many cluster images) treat ``"${A[@]}"`` of an empty array as unbound under
    ``set -u``; every array expansion must use the ``${A[@]+"${A[@]}"}`` form (no bash 4.3 here to run it on)."""
    text = (SLURM / "launch_node.sh").read_text(encoding="utf-8")
    assert "set -euo pipefail" in text
    code = "\n".join(line.split("#", 1)[0] for line in text.splitlines())
    arrays = set(re.findall(r"\$\{(\w+)\[@\]\}", code))
    assert {"DRY", "STAGE_ARGS"} <= arrays
    for name in arrays:
        bare = re.findall(rf'(?<![+])"\$\{{{name}\[@\]\}}"', code)
        guarded = re.findall(rf'\$\{{{name}\[@\]\+"\$\{{{name}\[@\]\}}"\}}', code)
        assert guarded and not bare, f"{name}: expand as ${{{name}[@]+\"${{{name}[@]}}\"}}"


def test_node_launcher_runs_the_launch_without_dry_run(tmp_path: Path):
    """The real (not dry-run) path, where the DRY array is empty: the command reaches the Python launcher."""
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    fake_python = venv / "bin" / "python"
    fake_python.write_text('#!/bin/bash\nprintf "%s\\n" "$@" > "$ARGS_OUT"\n')
    fake_python.chmod(0o755)
    fake_bin = tmp_path / "bin"
    fake_bin.mkdir()
    (fake_bin / "scontrol").write_text('#!/bin/bash\nprintf "gpu07\\ngpu08\\n"\n')
    (fake_bin / "scontrol").chmod(0o755)
    out = tmp_path / "args.txt"
    env = {**os.environ, "PATH": f"{fake_bin}:{os.environ['PATH']}", "SLURM_NODEID": "0", "SLURM_NNODES": "2",
           "SLURM_JOB_NODELIST": "gpu[07-08]", "VENV": str(venv), "ARGS_OUT": str(out)}  # fmt: skip
    env.pop("DRY_RUN", None)
    done = subprocess.run(["bash", str(SLURM / "launch_node.sh")], cwd=PROJECT_ROOT, env=env, capture_output=True,
                          text=True, timeout=60)  # fmt: skip
    assert done.returncode == 0, done.stderr
    args = out.read_text().splitlines()
    assert args[:3] == ["-m", "pipelines.training.distributed", "launch"] and "--dry-run" not in args
    assert args[args.index("--") + 1 :] == ["--params", "params.yaml", "--section", "train.sft"]
