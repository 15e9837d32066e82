"""Load a trained run (its ``config.yml`` and latest checkpoint), with one-line errors; ``config.yml`` is read by a
loader that builds config dataclasses only (nerfstudio's ``load_config`` builds any object a file names)."""

from __future__ import annotations

import dataclasses
import enum
import importlib
import inspect
import pathlib
from pathlib import Path
from typing import Any, Iterator, Literal, Tuple

import torch
import yaml
from nerfstudio.engine.trainer import TrainerConfig
from nerfstudio.pipelines.base_pipeline import Pipeline

from rff_field.core.errors import UsageError
from rff_field.nerf.filtered_model import FilteredModelConfig

HINT = "pass the config.yml that ns-train printed at the end of training"
CONFIG_MODULES = ("nerfstudio.", "rff_field.", "method_configs.", "torch.optim.")
"""The modules whose configs (and classes and functions they name, e.g. ``_target``) a run's config.yml may hold."""
PATHS = {f"pathlib.{name}": getattr(pathlib, name) for name in ("Path", "PosixPath", "WindowsPath", "PurePath",
                                                                 "PurePosixPath", "PureWindowsPath")}  # fmt: skip
PYTHON_TAG = "tag:yaml.org,2002:python/"


class ConfigLoader(yaml.SafeLoader):
    """YAML's safe loader that also builds :data:`CONFIG_MODULES`' dataclasses, classes, functions and enums, paths and
    tuples; :func:`load_config_yaml` checks every tag before it builds."""


def _allowed(name: str, kind: str) -> Any:
    """The object ``name`` (``module.attribute``) that a ``python/<kind>`` tag may build or name, or None."""
    if kind == "object/apply" and name in PATHS:
        return PATHS[name]
    module, _, attribute = name.rpartition(".")
    if not module.startswith(CONFIG_MODULES) and f"{module}." not in CONFIG_MODULES:
        return None
    try:
        found = getattr(importlib.import_module(module), attribute)
    except (ImportError, AttributeError, ValueError):
        return None
    if not str(getattr(found, "__module__", "")).startswith(CONFIG_MODULES):  # not imported from elsewhere
        return None
    is_class = isinstance(found, type)
    if kind == "object":
        return found if is_class and dataclasses.is_dataclass(found) else None
    if kind == "object/apply":
        return found if is_class and issubclass(found, enum.Enum) else None
    if kind == "name":
        return found if is_class or inspect.isfunction(found) else None
    return None


def _construct_object(loader: ConfigLoader, suffix: str, node: yaml.MappingNode) -> Iterator[Any]:
    instance = object.__new__(_allowed(suffix, "object"))
    yield instance
    instance.__dict__.update(loader.construct_mapping(node, deep=True))


def _construct_apply(loader: ConfigLoader, suffix: str, node: yaml.SequenceNode) -> Any:
    return _allowed(suffix, "object/apply")(*loader.construct_sequence(node, deep=True))


ConfigLoader.add_multi_constructor(PYTHON_TAG + "object:", _construct_object)
ConfigLoader.add_multi_constructor(PYTHON_TAG + "object/apply:", _construct_apply)
ConfigLoader.add_multi_constructor(PYTHON_TAG + "name:", lambda loader, suffix, node: _allowed(suffix, "name"))
ConfigLoader.add_constructor(PYTHON_TAG + "tuple", lambda loader, node: tuple(loader.construct_sequence(node)))


def load_config_yaml(text: str, source: str) -> Any:
    """The object a ``config.yml`` describes; a :class:`UsageError` names ``source`` and the tag, before anything is
    built, if it holds an object :class:`ConfigLoader` does not build."""
    loader = ConfigLoader(text)
    try:
        root = loader.get_single_node()
        pending, seen = [root] if root is not None else [], set()
        while pending:
            node = pending.pop()
            if id(node) in seen:
                continue
            seen.add(id(node))
            kind, _, name = (
                node.tag[len(PYTHON_TAG) :].partition(":") if node.tag.startswith(PYTHON_TAG) else ("", "", "")
            )
            safe = node.tag in ConfigLoader.yaml_constructors and not node.tag.startswith(PYTHON_TAG)
            if not (safe or node.tag == PYTHON_TAG + "tuple" or (kind and _allowed(name, kind) is not None)):
                raise UsageError(f"{source} holds {node.tag.replace('tag:yaml.org,2002:', '!!')}, which is not a "
                                 f"nerfstudio config; nothing in it was built. {HINT}")  # fmt: skip
            if isinstance(node, yaml.MappingNode):
                pending += [item for pair in node.value for item in pair]
            elif isinstance(node, yaml.SequenceNode):
                pending += node.value
        return loader.construct_document(root) if root is not None else None
    finally:
        loader.dispose()


def read_run_config(config_path: Path) -> TrainerConfig:
    """A run of this package's methods with a checkpoint, its checkpoint folder made absolute (beside ``config.yml``);
    anything else is a :class:`UsageError`."""
    config_path = Path(config_path)
    if not config_path.is_file():
        raise UsageError(f"--load-config {config_path} is not a file; {HINT}")
    source = f"--load-config {config_path}"
    try:
        config = load_config_yaml(config_path.read_text(), source)
    except UsageError:
        raise
    except Exception as err:  # yaml's errors, a file that is not text, a config of another version
        raise UsageError(f"{source} is not a readable nerfstudio config ({type(err).__name__}); {HINT}") from None
    if not isinstance(config, TrainerConfig):
        raise UsageError(f"{source} is not a nerfstudio config.yml; {HINT}")
    if not isinstance(getattr(getattr(config, "pipeline", None), "model", None), FilteredModelConfig):
        raise UsageError(f"{source} is a '{getattr(config, 'method_name', None)}' run; this command reads runs of "
                         "rff-nerf(-lite) and rff-nerfacto(-lite)")  # fmt: skip
    config.relative_model_dir = config_path.resolve().parent / config.relative_model_dir
    if not any(config.relative_model_dir.glob("step-*.ckpt")):
        raise UsageError(f"no checkpoint (step-*.ckpt) in {config.relative_model_dir}; train the model first")
    return config


def load_pipeline(
    config_path: Path, test_mode: Literal["test", "val", "inference"] = "inference"
) -> Tuple[TrainerConfig, Pipeline, int]:
    """A trained run's config, pipeline (eval mode, CUDA if any) and step, as nerfstudio's ``eval_setup``."""
    config = read_run_config(config_path)
    checkpoint = max(config.relative_model_dir.glob("step-*.ckpt"), key=lambda p: int(p.stem.split("-")[1]))
    state = torch.load(checkpoint, map_location="cpu", weights_only=True)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    pipeline = config.pipeline.setup(device=device, test_mode=test_mode)
    pipeline.eval()
    pipeline.load_pipeline(state["pipeline"], state["step"])
    return config, pipeline, int(state["step"])
