"""A PyTorch module as a brickdl Model: exported through torch.onnx, imported as brickdl-tune
imports an ONNX file (its weights included).

    import brickdl.torch
    model = brickdl.torch.from_module(torchvision.models.resnet18().eval(),
                                      torch.randn(8, 3, 224, 224))
    plan = brickdl.tune(model, target="H200", precision="tf32", backend="none")

Needs torch (and onnx, which torch.onnx uses); without it, importing this module raises
ImportError with one line saying so.
"""
from __future__ import annotations

import os
import tempfile
from typing import Any, Optional, Sequence, Union

try:
    import torch as _torch
except ImportError as e:  # one clear line, not torch's traceback
    raise ImportError("brickdl.torch needs PyTorch (pip install torch); brickdl.Model.onnx "
                      "takes a model exported elsewhere") from e

from . import Model

__all__ = ["from_module", "export"]


def export(module: Any, example_inputs: Union[Any, Sequence[Any]], path: Union[str, os.PathLike],
           opset: int = 17, input_names: Optional[Sequence[str]] = None) -> str:
    """Exports `module` (in eval mode) to the ONNX file `path` with torch.onnx (TorchScript
    exporter, `opset`) and returns the path. example_inputs: a tensor or a tuple of tensors."""
    args = tuple(example_inputs) if isinstance(example_inputs, (list, tuple)) else (example_inputs,)
    names = list(input_names) if input_names else (
        ["input"] if len(args) == 1 else [f"input{k}" for k in range(len(args))])
    was_training = module.training
    module.eval()
    try:
        with _torch.no_grad():
            kwargs = {"dynamo": False} if "dynamo" in _torch.onnx.export.__code__.co_varnames else {}
            _torch.onnx.export(module, args, os.fspath(path), opset_version=opset,
                               input_names=names, output_names=None, **kwargs)
    finally:
        module.train(was_training)
    return os.fspath(path)


def from_module(module: Any, example_inputs: Union[Any, Sequence[Any]], *,
                path: Optional[Union[str, os.PathLike]] = None, opset: int = 17,
                input_names: Optional[Sequence[str]] = None) -> Model:
    """`module` as a brickdl Model: exported to ONNX (into `path`, else a temporary file removed
    with the model) and imported with its weights. The example inputs fix the batch and the
    input size."""
    if path is not None:
        return Model.onnx(export(module, example_inputs, path, opset, input_names))
    # The file stays while the model lives: tune's settings load it again.
    tmp = tempfile.TemporaryDirectory(prefix="brickdl-torch-")
    name = type(module).__name__.lower() or "module"
    model = Model.onnx(export(module, example_inputs, os.path.join(tmp.name, name + ".onnx"),
                              opset, input_names))
    return Model(model._e, keep=tmp)
