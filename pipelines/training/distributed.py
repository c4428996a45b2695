"""Distributed training configs: find them, prove them valid, and build the `accelerate launch` command.

The project ships DeepSpeed JSON configs (``configs/deepspeed/*.json``) whose batch, precision and
optimizer values are ``"auto"``, and accelerate YAML configs (``configs/accelerate/*.yaml``) that point
at one of them and say how many machines and processes to start. This module:

- lists both kinds (:func:`accelerate_configs`, :func:`deepspeed_configs`);
- reads an accelerate YAML the way ``accelerate launch`` does and checks it is launchable
  (:func:`load_accelerate_config`);
- fills every ``"auto"`` exactly as the HF Trainer does (``HfTrainerDeepSpeedConfig``) from
  :class:`TrainerValues`, then lets DeepSpeed's own ``DeepSpeedConfig`` parse the result for the given
  world size (:func:`validate_deepspeed_config`) — no process group is started;
- builds the ``accelerate launch`` command line for one node or one node of many
  (:func:`launch_command`), which ``configs/slurm/launch_node.sh`` runs on every Slurm node.

CLI: ``python -m pipelines.training.distributed validate`` checks every shipped config;
``python -m pipelines.training.distributed launch --config-file X [--num-machines N ...] -- ARGS``
prints (``--dry-run``) or runs the launch command.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

PROJECT_ROOT = Path(__file__).resolve().parents[2]
CONFIGS = PROJECT_ROOT / "configs"
# Keys accelerate refuses in a YAML that names a `deepspeed_config_file` (they belong in the JSON).
_DS_FILE_CONFLICTS = {
    "gradient_accumulation_steps",
    "gradient_clipping",
    "zero_stage",
    "offload_optimizer_device",
    "offload_param_device",
    "offload_param_nvme_path",
    "offload_optimizer_nvme_path",
    "zero3_save_16bit_model",
}


class DistributedConfigError(ValueError):
    """A config file that would fail at launch; the message names the file and the fix."""


@dataclass(frozen=True)
class AccelerateLaunchConfig:
    """What an accelerate YAML says about a launch: where, how many, and with which DeepSpeed JSON."""

    path: Path
    num_machines: int
    num_processes: int  # total over all machines, as accelerate counts it
    deepspeed_config_file: Path
    zero3_init_flag: bool | None
    multinode_launcher: str | None

    @property
    def processes_per_machine(self) -> int:
        return self.num_processes // self.num_machines


@dataclass
class TrainerValues:
    """The TrainingArguments values HF copies into a DeepSpeed config's ``"auto"`` fields."""

    world_size: int = 8
    per_device_train_batch_size: int = 4
    gradient_accumulation_steps: int = 4
    learning_rate: float = 2e-5
    max_grad_norm: float = 1.0
    weight_decay: float = 0.0
    adam_beta1: float = 0.9
    adam_beta2: float = 0.999
    adam_epsilon: float = 1e-8
    bf16: bool = True
    fp16: bool = False
    warmup_steps: int = 10
    num_training_steps: int = 100
    hidden_size: int = 4096  # the model's hidden size; fills the bucket sizes marked "auto"
    save_on_each_node: bool = False
    bf16_full_eval: bool = field(default=False, repr=False)
    fp16_full_eval: bool = field(default=False, repr=False)

    def get_warmup_steps(self, num_training_steps: int) -> int:
        return min(self.warmup_steps, num_training_steps)


def accelerate_configs(root: Path = CONFIGS) -> list[Path]:
    """Every accelerate YAML under ``root/accelerate``, sorted."""
    return sorted((root / "accelerate").glob("**/*.yaml"))


def deepspeed_configs(root: Path = CONFIGS) -> list[Path]:
    """Every DeepSpeed JSON under ``root/deepspeed``, sorted."""
    return sorted((root / "deepspeed").glob("**/*.json"))


def load_accelerate_config(path: Path | str, project_root: Path = PROJECT_ROOT) -> AccelerateLaunchConfig:
    """Parse an accelerate YAML with accelerate's own loader and check it can launch DeepSpeed.

    Relative ``deepspeed_config_file`` paths resolve against ``project_root`` (runs start there).
    Raises :class:`DistributedConfigError` naming the file and the fix.
    """
    from accelerate.commands.config.config_args import ClusterConfig
    from accelerate.utils import DistributedType

    path = Path(path)
    try:
        cfg = ClusterConfig.from_yaml_file(yaml_file=str(path))
    except (ValueError, TypeError) as exc:
        raise DistributedConfigError(f"{path}: not a valid accelerate config ({exc})") from exc

    def fail(message: str) -> None:
        raise DistributedConfigError(f"{path}: {message}")

    if cfg.distributed_type != DistributedType.DEEPSPEED:
        fail(f"distributed_type is {cfg.distributed_type.value}; set it to DEEPSPEED")
    ds = dict(cfg.deepspeed_config or {})
    if "deepspeed_config_file" not in ds:
        fail("deepspeed_config.deepspeed_config_file is missing; point it at a file in configs/deepspeed/")
    conflicts = sorted(_DS_FILE_CONFLICTS & ds.keys())
    if conflicts:
        fail(f"deepspeed_config has {conflicts}, which accelerate rejects next to a config file; set them in the JSON")
    if cfg.mixed_precision not in (None, "no"):
        fail("mixed_precision is set; remove it: with a DeepSpeed file, precision is bf16/fp16 'auto' in the JSON")
    if cfg.num_machines < 1 or cfg.num_processes < 1:
        fail("num_machines and num_processes must be at least 1")
    if cfg.num_processes % cfg.num_machines:
        fail(f"num_processes ({cfg.num_processes}) is the total over all machines; make it a multiple of num_machines")
    if not 0 <= cfg.machine_rank < cfg.num_machines:
        fail(f"machine_rank {cfg.machine_rank} is outside 0..{cfg.num_machines - 1}")
    launcher = ds.get("deepspeed_multinode_launcher")
    if cfg.num_machines > 1 and launcher != "standard":
        fail("multi-node configs need deepspeed_multinode_launcher: standard (one `accelerate launch` per node)")
    ds_file = Path(ds["deepspeed_config_file"])
    ds_file = ds_file if ds_file.is_absolute() else project_root / ds_file
    if not ds_file.is_file():
        fail(f"deepspeed_config_file {ds['deepspeed_config_file']} does not exist (relative to {project_root})")
    init_flag = ds.get("zero3_init_flag")
    return AccelerateLaunchConfig(
        path=path,
        num_machines=cfg.num_machines,
        num_processes=cfg.num_processes,
        deepspeed_config_file=ds_file,
        zero3_init_flag=None if init_flag is None else str(init_flag).lower() == "true",
        multinode_launcher=launcher,
    )


def _remaining_autos(node: Any, prefix: str = "") -> list[str]:
    if isinstance(node, dict):
        return [key for k, v in node.items() for key in _remaining_autos(v, f"{prefix}{k}.")]
    return [prefix.rstrip(".")] if node == "auto" else []


def fill_auto_values(config: Path | str | dict, values: TrainerValues) -> dict:
    """The DeepSpeed config dict after HF's Trainer filled its ``"auto"`` values from ``values``.

    Uses ``HfTrainerDeepSpeedConfig.trainer_config_process`` / ``trainer_config_finalize``, the same two
    calls the Trainer makes; a DeepSpeed value that contradicts ``values`` raises ``ValueError``.
    """
    from transformers.integrations.deepspeed import HfTrainerDeepSpeedConfig, unset_hf_deepspeed_config

    raw = json.loads(Path(config).read_text(encoding="utf-8")) if not isinstance(config, dict) else config
    try:
        hf_config = HfTrainerDeepSpeedConfig(json.loads(json.dumps(raw)))
        hf_config.trainer_config_process(values)
        model = SimpleNamespace(config=SimpleNamespace(hidden_size=values.hidden_size))
        hf_config.trainer_config_finalize(values, model, values.num_training_steps)
        return hf_config.config
    finally:
        # HF keeps a global weak reference that switches on ZeRO-3 model loading; never leak it.
        unset_hf_deepspeed_config()


def validate_deepspeed_config(config: Path | str | dict, values: TrainerValues | None = None) -> Any:
    """Fill ``"auto"`` values as HF does, then parse with DeepSpeed for ``values.world_size`` ranks.

    Returns the ``deepspeed.runtime.config.DeepSpeedConfig``; raises ``ValueError`` (or DeepSpeed's
    own config error) when HF or DeepSpeed would refuse the file at launch.
    """
    from deepspeed.runtime.config import DeepSpeedConfig

    values = values or TrainerValues()
    filled = fill_auto_values(config, values)
    left = _remaining_autos(filled)
    if left:
        where = "DeepSpeed config" if isinstance(config, dict) else str(config)
        raise ValueError(f"{where}: 'auto' left that the HF Trainer cannot fill: {left}; give explicit values")

    class _ConfigForWorld(DeepSpeedConfig):
        # DeepSpeedConfig reads the world size from an initialised process group; set it directly instead.
        def _configure_train_batch_size(self) -> None:
            self.world_size = values.world_size
            super()._configure_train_batch_size()

    return _ConfigForWorld(filled)


def launch_command(
    config_file: Path | str,
    script_args: Sequence[str] = (),
    *,
    module: str | None = "stages.train",
    num_machines: int = 1,
    processes_per_machine: int | None = None,
    machine_rank: int = 0,
    main_process_ip: str | None = None,
    main_process_port: int | None = None,
    launcher: Sequence[str] = ("accelerate", "launch"),
) -> list[str]:
    """The ``accelerate launch`` argv for one node.

    Single node: ``--num_processes`` only if ``processes_per_machine`` is given (else the YAML's).
    Multi-node (``num_machines > 1``): ``main_process_ip`` is required and the command carries
    ``--num_machines``, the total ``--num_processes``, ``--machine_rank`` and the rendezvous address.
    ``module`` runs ``python -m module``; ``None`` means ``script_args[0]`` is a script path.
    """
    if num_machines < 1 or not 0 <= machine_rank < num_machines:
        raise ValueError(f"machine_rank {machine_rank} must be in 0..{num_machines - 1}")
    cmd = [*launcher, "--config_file", str(config_file)]
    if num_machines > 1:
        if not main_process_ip:
            raise ValueError("multi-node launch needs main_process_ip (the first node's address)")
        if processes_per_machine is None:
            processes_per_machine = load_accelerate_config(config_file).processes_per_machine
        cmd += ["--num_machines", str(num_machines), "--machine_rank", str(machine_rank)]
        cmd += ["--main_process_ip", main_process_ip]
    if processes_per_machine is not None:
        cmd += ["--num_processes", str(processes_per_machine * num_machines)]
    if main_process_port is not None:
        cmd += ["--main_process_port", str(main_process_port)]
    if module:
        cmd += ["-m", module]
    return cmd + list(script_args)


def validate_all(root: Path = CONFIGS, project_root: Path = PROJECT_ROOT) -> list[str]:
    """Check every accelerate YAML and its DeepSpeed JSON at the YAML's world size; one line per file.

    Uses the :class:`TrainerValues` defaults for the batch values; raises on the first invalid file.
    """
    lines = []
    checked: set[tuple[Path, int]] = set()
    for yaml_path in accelerate_configs(root):
        launch = load_accelerate_config(yaml_path, project_root)
        checked.add((launch.deepspeed_config_file.resolve(), launch.num_processes))
        ds = validate_deepspeed_config(launch.deepspeed_config_file, TrainerValues(world_size=launch.num_processes))
        lines.append(
            f"ok {yaml_path.relative_to(root)}: {launch.num_machines} node(s) x {launch.processes_per_machine} "
            f"process(es), ZeRO-{ds.zero_optimization_stage}, train_batch_size {ds.train_batch_size} "
            f"(per-device {ds.train_micro_batch_size_per_gpu} x accumulation {ds.gradient_accumulation_steps})"
        )
    for json_path in deepspeed_configs(root):
        if not any(path == json_path.resolve() for path, _ in checked):
            validate_deepspeed_config(json_path)
            lines.append(f"ok {json_path.relative_to(root)} (no accelerate config uses it)")
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m pipelines.training.distributed", description=__doc__.splitlines()[0]
    )
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("validate", help="check every config under configs/accelerate and configs/deepspeed")
    launch = sub.add_parser("launch", help="print or run `accelerate launch` for this node")
    launch.add_argument("--config-file", required=True)
    launch.add_argument("--module", default="stages.train")
    launch.add_argument("--num-machines", type=int, default=1)
    launch.add_argument("--processes-per-machine", type=int)
    launch.add_argument("--machine-rank", type=int, default=0)
    launch.add_argument("--main-process-ip")
    launch.add_argument("--main-process-port", type=int)
    launch.add_argument("--dry-run", action="store_true", help="print the command instead of running it")
    launch.add_argument("script_args", nargs="*", help="arguments for the training module (after --)")
    args = parser.parse_args(argv)
    if args.command == "validate":
        for line in validate_all():
            print(line)
        return 0
    cmd = launch_command(
        args.config_file,
        args.script_args,
        module=args.module,
        num_machines=args.num_machines,
        processes_per_machine=args.processes_per_machine,
        machine_rank=args.machine_rank,
        main_process_ip=args.main_process_ip,
        main_process_port=args.main_process_port,
    )
    print(shlex.join(cmd), flush=True)
    if args.dry_run:
        return 0
    os.execvp(cmd[0], cmd)
    return 1  # not reached


if __name__ == "__main__":
    sys.exit(main())
