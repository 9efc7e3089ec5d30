"""Lesson 04 Defining models: checks for every exercise.

Model exercises hand the check a *class* (``check.check_lenet_layers(LeNet)``);
the check builds it, runs it through ``model(x)`` with hooks on every layer,
and compares it with the reference in ``helpers.reference.models``. When a
forward pass fails, the hooks say which layer failed and why (channels that do
not match, a missing flatten), instead of a bare PyTorch traceback.
"""

from __future__ import annotations

import contextlib
import copy
import functools
import inspect
import math
import warnings
from typing import Any, Callable, Iterator, Sequence
from unittest import mock

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn
from torch.overrides import TorchFunctionMode

from helpers.checks import (FUNCTIONAL_DROPOUT_IN_EVAL, Allow, CheckError, Mistake, call, describe,
                           differs_between_calls, expect, expect_mode, expect_tensor, passed, runs_here, same_value,
                           substitute)
from helpers.reference import models as ref

ModelFactory = Callable[[], nn.Module]


def _not_this_mistake() -> Any:
    """Used inside a Mistake's wrong_answer when the mistake cannot apply to this input (it raises,
    which Mistake.explains reads as "not this mistake"; returning None would match a None answer)."""
    raise LookupError("this mistake does not apply to this input")


def _randn(*shape: int, seed: int = 0) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


def _seeded(factory: Callable[[], Any], seed: int) -> Any:
    """Build with a fixed seed, so two builds start from identical default weights."""
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        return factory()


# --- building a learner's class and running it --------------------------------------------------

def _no_super(name: str, detail: str = "") -> CheckError:
    return CheckError(
        f"building {name}() failed: " + (detail or "the module has no registry of parameters and submodules"),
        where=f"look at the first line of {name}.__init__",
        mistake=f"{name}.__init__ must call super().__init__() before anything else: nn.Module creates its "
                "registries of parameters, submodules and hooks there")


def _build(cls: Any, name: str, *args: Any, **kwargs: Any) -> nn.Module:
    """Instantiate the learner's nn.Module subclass, naming the classic construction mistakes."""
    if isinstance(cls, nn.Module):
        raise CheckError(f"the check was given an instance of {name}; expected the class {name} itself",
                         where="look at the argument of the check cell", mistake=f"pass the class itself, not an "
                         f"instance: write ({name}), not ({name}())")
    try:
        with torch.random.fork_rng():  # building must not move the notebook's own random stream
            # task: "Creating a layer draws its first weights from PyTorch's global random generator"
            model = call(cls, *args, allow=Allow(global_rng=True), **kwargs)
    except CheckError as error:
        cause = error.__cause__
        if isinstance(cause, AttributeError) and "before Module.__init__() call" in str(cause):
            raise _no_super(name, str(cause)) from None
        raise
    if not isinstance(model, nn.Module):
        raise CheckError(f"{name}(...) built {describe(model)}; expected an nn.Module",
                         where=f"look at the line class {name}(...)", mistake=f"write class {name}(nn.Module):")
    if "_modules" not in vars(model):
        raise _no_super(name)
    return model


def _layers(model: nn.Module) -> dict[str, nn.Module]:
    """The leaf modules (those with no children) by their dotted name."""
    return {n: m for n, m in model.named_modules() if n and not any(True for _ in m.children())}


def _explain_layer_failure(layer: str, module: nn.Module, args: tuple, first: bool = False) -> str:
    """Why a layer could not take the input it was given, in the lesson's words; ``first``: it is the first layer
    to run, so its input is the model's own."""
    x = args[0] if args and isinstance(args[0], torch.Tensor) else None
    if x is None:
        return ""
    shape = list(x.shape)
    if layer.isdigit():  # a layer of an nn.Sequential is named by its position
        layer = f"layer {layer} ({type(module).__name__})"
    weights = {p.dtype for p in module.parameters(recurse=False)}
    if x.is_floating_point() and weights and x.dtype not in weights:
        return (f"{layer}'s weights are {', '.join(sorted(map(str, weights)))} but its input is {x.dtype}: a layer "
                "computes only in its own dtype. Keep the model in float32, the dtype of the images (no .double(), "
                "no dtype=torch.float64 when building a layer)")
    if isinstance(module, nn.Conv2d) and x.dim() in (3, 4) and x.shape[-3] != module.in_channels and first:
        return (f"{layer} is the model's first layer, with in_channels={module.in_channels}, but the images (shape "
                f"{shape}) have {x.shape[-3]} channels: its in_channels must be the images' number of channels. "
                "Where the function is given that number (in_channels), build the layer from it, not from a fixed one")
    if isinstance(module, nn.Conv2d) and x.dim() in (3, 4) and x.shape[-3] != module.in_channels:
        return (f"the channels do not match between layers: {layer} has in_channels={module.in_channels}, but its input "
                f"(shape {shape}) has {x.shape[-3]} channels. A Conv2d's in_channels must equal the out_channels "
                "of the layer before it")
    if isinstance(module, (nn.BatchNorm1d, nn.BatchNorm2d)) and x.dim() >= 2 and x.shape[1] != module.num_features:
        return (f"{layer} has num_features={module.num_features}, but its input (shape {shape}) has {x.shape[1]} "
                "channels: a BatchNorm's num_features must equal the out_channels of the layer before it")
    if isinstance(module, nn.Linear):
        if x.dim() == 1:
            return (f"{layer} received a 1-D input of shape {shape}: you flattened the batch dimension too. "
                    "Use torch.flatten(x, 1) (or nn.Flatten()), which keeps dimension 0, the batch")
        if x.dim() > 2:
            return (f"{layer} received the {x.dim()}-D feature maps (shape {shape}) unflattened: flatten them to "
                    "[N, features] first, with torch.flatten(x, 1) in forward or, in an nn.Sequential (which has "
                    "no forward of yours), with an nn.Flatten() layer before the Linear")
        if x.shape[-1] != module.in_features:
            return (f"{layer} has in_features={module.in_features}, but each sample reaches it with "
                    f"{x.shape[-1]} features (input shape {shape}). in_features must equal the size of what "
                    "comes in: channels x height x width of the last feature maps, once flattened")
    return ""


LayerTrace = dict[str, tuple[torch.Tensor, Any]]  # layer name -> (its first input, its output), in run order


def _trace(model: nn.Module, x: torch.Tensor) -> tuple[Any, LayerTrace]:
    """``model(x)`` with what each leaf layer received and returned on its first call (detached copies)."""
    seen: LayerTrace = {}

    def hook(layer: str):
        def record(module: nn.Module, args: tuple, output: Any) -> None:
            if layer not in seen and args and isinstance(args[0], torch.Tensor):
                seen[layer] = (args[0].detach().clone(),
                               output.detach().clone() if isinstance(output, torch.Tensor) else output)
        return record

    handles = [m.register_forward_hook(hook(n)) for n, m in _layers(model).items()]
    try:
        return model(x), seen
    finally:
        for handle in handles:
            handle.remove()


def _first_divergence(got: LayerTrace, want: LayerTrace, values: bool = True) -> tuple[str, str] | None:
    """The first layer of the task's network (in its run order) whose input differs from the one it gets there,
    and the layer that runs before it: (layer, previous), or None when every layer that ran got the right input.
    ``values``: compare the values too (same weights in both), not only the shapes."""
    previous = "the input"
    for layer, (want_in, _) in want.items():
        if layer not in got:
            return None
        got_in = got[layer][0]
        if got_in.shape != want_in.shape or (values and not torch.allclose(got_in, want_in, atol=1e-5, rtol=1e-4)):
            return layer, previous
        previous = layer
    return None


def _between(layer: str, previous: str) -> str:
    return f"before {layer}" if previous == "the input" else f"between {previous} and {layer}"


def _divergence_where(got: LayerTrace, want: LayerTrace, layer: str, previous: str) -> str:
    got_in, want_in = got[layer][0], want[layer][0]
    if got_in.shape != want_in.shape:
        seen = f"{layer} received an input of shape {list(got_in.shape)}; in the task's network it gets " \
               f"{list(want_in.shape)}"
    else:
        seen = f"{layer} received the right shape, {list(got_in.shape)}, but other values than in the task's network"
    return f"look at what forward does {_between(layer, previous)}: {seen}"


def _reordered(got: LayerTrace, want: LayerTrace, layer: str) -> bool:
    """Whether ``layer`` received exactly the expected numbers, but in another order."""
    got_in, want_in = got[layer][0], want[layer][0]
    return got_in.numel() == want_in.numel() and not torch.allclose(got_in.flatten(), want_in.flatten()) \
        and torch.allclose(got_in.flatten().sort().values, want_in.flatten().sort().values, atol=1e-6)


def _trace_mistakes(model: nn.Module, reference: nn.Module, x: torch.Tensor) -> list[Mistake]:
    """Where a model with the reference's weights first parts from the reference: the first layer whose input
    differs, or (every layer right) what comes after the last one. Give them after the specific mistakes."""
    try:
        with torch.no_grad():
            _, got = _trace(model, x.clone())
            want_out, want = _trace(reference, x.clone())
    except Exception:  # noqa: BLE001 - a model that cannot run twice is explained by the comparison itself
        return []
    split = _first_divergence(got, want)
    if split is not None:
        layer, previous = split
        where = _divergence_where(got, want, layer, previous)
        reordered = _reordered(got, want, layer)
        flatten = isinstance(_layers(reference)[layer], nn.Linear)
        message = (f"{layer} receives the right numbers in another order: what forward does "
                   f"{_between(layer, previous)} reorders them"
                   + (" (a flatten that does not keep dimension 0 as the batch, such as view(features, -1), or a "
                      "transpose): use torch.flatten(x, 1)" if flatten else "")
                   if reordered else None)
        return [Mistake(message, matches=lambda _: True, where=where)]
    last = list(want)[-1]
    if last in got and torch.allclose(got[last][1], want[last][1], atol=1e-5, rtol=1e-4):
        return [Mistake(None, matches=lambda _: True,
                        where=f"every layer, {last} included, computes what it computes in the task's network: "
                              f"look at what forward does with {last}'s output")]
    return []


def _run(model: nn.Module, x: torch.Tensor, name: str, reference: nn.Module | None = None) -> tuple[Any, set[str]]:
    """``model(x)`` with a hook on every layer; returns the output and the layers whose hooks ran.

    Steps:
        1. Register a pre-hook (remember the input) and a forward hook (mark done) on every layer.
        2. Call ``model(x)``; if it fails, explain it with the layer that was running, or with the first
           layer whose input shape differs from the one it gets in ``reference`` (same layer names).
        3. Remove the hooks, whatever happened.
    """
    running: dict[str, tuple] = {}
    fired: set[str] = set()
    order: list[str] = []
    shapes: LayerTrace = {}

    def pre(layer: str):
        def hook(module: nn.Module, args: tuple) -> None:
            running[layer] = args
            order.append(layer)
            if layer not in shapes and args and isinstance(args[0], torch.Tensor):
                shapes[layer] = (torch.empty(args[0].shape, device="meta"), None)
        return hook

    def post(layer: str):
        def hook(module: nn.Module, args: tuple, output: Any) -> None:
            running.pop(layer, None)
            fired.add(layer)
        return hook

    layers = _layers(model)
    handles = [m.register_forward_pre_hook(pre(n)) for n, m in layers.items()]
    handles += [m.register_forward_hook(post(n)) for n, m in layers.items()]
    try:
        return model(x), fired
    except NotImplementedError:
        raise CheckError(f"{name}.forward is not written yet: it raised NotImplementedError",
                         where=f"look in {name}.forward for `raise NotImplementedError()`",
                         mistake="replace `raise NotImplementedError()` with your code") from None
    except Exception as error:
        message = f"{name}: model(x) for x of shape {list(x.shape)} raised {type(error).__name__}: {error}"
        failing = [layer for layer in order if layer in running]
        why = None
        if failing:
            why = _explain_layer_failure(failing[-1], layers[failing[-1]], running[failing[-1]],
                                         first=order[0] == failing[-1]) or None
            message += f"\nThe error happened inside layer '{failing[-1]}'"
        elif order:
            split = _shape_divergence(shapes, reference, x)
            if split is not None:
                raise CheckError(message + f"\nThe error happened in your forward code after layer '{order[-1]}' "
                                 "had run", where=split) from error
            message += f"\nThe error happened in your forward code after layer '{order[-1]}' had run"
        built = "in your nn.Sequential: its arguments and the layer before it" if isinstance(model, nn.Sequential) \
            else "how it is built in __init__ and what your forward gives it"
        raise CheckError(message, mistake=why, where=(f"look at layer '{failing[-1]}' {built}" if failing else
                                         f"look at your forward code after layer '{order[-1]}' (the reshape/flatten "
                                         "between layers)" if order else
                                         "look at the start of your forward, before the first layer")) from error
    finally:
        for handle in handles:
            handle.remove()


def _shape_divergence(shapes: LayerTrace, reference: nn.Module | None, x: torch.Tensor) -> str | None:
    """Where to look when forward failed between layers: the first layer whose input shape differs from the
    one it gets in ``reference``, if any (the shapes do not depend on the weights)."""
    if reference is None:
        return None
    try:
        with torch.no_grad():
            _, want = _trace(reference, x.clone())
    except Exception:  # noqa: BLE001 - no reference trace, no comparison
        return None
    split = _first_divergence(shapes, want, values=False)
    return _divergence_where(shapes, want, *split) if split is not None else None


def _expect_hooks_ran(model: nn.Module, fired: set[str], correct: bool, name: str) -> None:
    """Every layer with parameters must run through ``__call__`` (so its hooks fire)."""
    silent = [n for n, m in _layers(model).items() if any(True for _ in m.parameters(recurse=False)) and n not in fired]
    if not silent:
        return
    layer = silent[0]
    if correct:
        raise CheckError(
            f"{name}: the output is right, but forward hooks did not run for {silent}; expected every layer to run "
            "through its hooks", where=f"look at how forward uses self.{layer}",
            mistake=f"call model(x), not model.forward(x): self.{layer}.forward(...) (or a functional call with its "
                    f"weight) bypasses nn.Module.__call__, which runs the hooks around forward. Write self.{layer}(x)")
    raise CheckError(
        f"{name}: the layer(s) {silent} never ran through model(x); expected every layer to take part",
        where=f"look at how forward uses self.{layer}",
        mistake=f"either forward does not use them, or it calls self.{layer}.forward(...) directly (call model(x), "
                "not model.forward(x): forward hooks did not run)")


# --- exercises 1 and 2: LeNet and MnistNet -------------------------------------------------------

_SHAPE_HINTS = {
    "LeNet": {"fc1": " = 16 * 5 * 5: a 32x32 image shrinks to 28 (conv 5x5), 14 (pool), 10 (conv 5x5), 5 (pool)"},
    "MnistNet": {"fc1": " = 4 * 4 * 50: a 28x28 digit shrinks to 24 (conv 5x5), 12 (pool), 8 (conv 5x5), 4 (pool)"},
}


def _describe_shape_difference(key: str, got: torch.Size, want: torch.Size, name: str) -> str:
    layer, _, kind = key.rpartition(".")
    hint = _SHAPE_HINTS.get(name, {}).get(layer, "")
    if kind == "weight" and len(want) == 4 and len(got) == 4:
        if got[1] != want[1]:
            return (f"{layer}'s in_channels should be {want[1]} (the out_channels of the layer before it); "
                    "a Conv2d weight is [out_channels, in_channels, kernel height, kernel width]")
        if got[0] != want[0]:
            return f"{layer} should have out_channels={want[0]}"
        return f"{layer} should have kernel_size={tuple(want[2:])}"
    if kind == "weight" and len(want) == 2 and len(got) == 2:
        if got[1] != want[1]:
            return f"{layer}'s in_features should be {want[1]}{hint}; a Linear weight is [out_features, in_features]"
        return f"{layer} should have out_features={want[0]}"
    return f"{layer} is not the kind of layer the task describes"


def _expect_same_layers(model: nn.Module, reference: nn.Module, name: str, x: torch.Tensor | None = None) -> None:
    """Same state_dict keys and shapes as the reference, naming the first layer that differs."""
    got = {k: v.shape for k, v in model.state_dict().items()}
    want = {k: v.shape for k, v in reference.state_dict().items()}
    layers = list(dict.fromkeys(k.rpartition(".")[0] for k in want))
    missing, extra = [k for k in want if k not in got], [k for k in got if k not in want]
    if missing or extra:
        detail = (f"missing {missing}" if missing else "") + ("; " if missing and extra else "") + \
                 (f"unexpected {extra}" if extra else "")
        no_bias = sorted({k.rpartition(".")[0] for k in missing})
        if not extra and all(k.endswith(".bias") and f"{k[:-len('bias')]}weight" in got for k in missing):
            # The layers are there under the task's names: only their biases are missing.
            where, mistake = (f"look at how {', '.join(no_bias)} {'is' if len(no_bias) == 1 else 'are'} built",
                              f"{', '.join(no_bias)} {'has' if len(no_bias) == 1 else 'have'} no bias: the task's "
                              "layers keep PyTorch's default bias=True (only a layer followed by batch norm drops "
                              "it); remove bias=False")
        elif missing and extra:
            where, mistake = ("look at the attribute names in __init__: they become the keys",
                              f"name the layers {', '.join(layers)} in __init__ (self.{layers[0]} = ...)")
        else:
            where, mistake = ("look at the layers __init__ creates: the task lists "
                              f"{', '.join(layers)}, with these parameters", None)
        raise CheckError(f"{name}'s state_dict keys differ from the task's layer names: {detail}",
                         where=where, mistake=mistake)
    count, want_count = ref.count_parameters(model), ref.count_parameters(reference)
    for key in want:
        if got[key] != want[key]:
            where = f"look at the arguments of layer {key.rpartition('.')[0]} (and the size table of section 2)"
            mistake = _describe_shape_difference(key, got[key], want[key], name)
            if len(want[key]) == 2 and len(got[key]) == 2 and got[key][1] != want[key][1] and x is not None:
                # a Linear sized to fit what arrives: where the sizes first part from the task's is the evidence
                where = _own_weights_divergence(model, reference, x) or where
                mistake = _conv_settings_difference(model, reference, key.rpartition(".")[0]) or mistake
            raise CheckError(
                f"{name} has {count:,} parameters instead of {want_count:,}; the first that differs is {key}, shape "
                f"{list(got[key])} instead of {list(want[key])}", where=where, mistake=mistake)


def _own_weights_divergence(model: nn.Module, reference: nn.Module, x: torch.Tensor) -> str | None:
    """Where the model, run with its own weights, first gives a layer an input of another shape than the task's
    network does (the shapes do not depend on the weights)."""
    try:
        with torch.no_grad(), torch.random.fork_rng():
            _, got = _trace(model, x.clone())
    except Exception:  # noqa: BLE001 - a model that cannot run is explained by the shapes alone
        return None
    return _shape_divergence(got, reference, x)


def _conv_settings_difference(model: nn.Module, reference: nn.Module, linear: str) -> str | None:
    """The first convolution (by the task's layer name) built with another padding, stride or dilation."""
    mine = dict(model.named_modules())
    for layer, original in reference.named_modules():
        conv = mine.get(layer)
        if not (isinstance(original, nn.Conv2d) and isinstance(conv, nn.Conv2d)):
            continue
        for setting in ("padding", "stride", "dilation"):
            if _setting(conv, setting) != _setting(original, setting):
                return (f"{layer} is built with {setting}={getattr(conv, setting)!r}; the task's {layer} keeps the "
                        f"default {setting}={getattr(original, setting)!r}, so its feature maps come out another "
                        f"size and {linear} was resized to fit: build {layer} as the task describes and keep the "
                        f"task's in_features for {linear}")
    return None


def _conv_net_variant(net: nn.Module, x: torch.Tensor, activation: Callable = F.relu,
                      pool: Callable = F.max_pool2d, flatten: Callable | None = None,
                      linear_after: str | None = None) -> torch.Tensor:
    """The LeNet/MnistNet forward pass with a swappable activation, pooling and flattening, and optionally no
    activation after the layer ``linear_after`` (to recognise mistakes)."""
    convs = [(n, m) for n, m in net.named_children() if n.startswith("conv")]
    fcs = [(n, m) for n, m in net.named_children() if n.startswith("fc")]
    for n, conv in convs:
        x = conv(x)
        x = pool(x if n == linear_after else activation(x), 2)
    x = flatten(x) if flatten is not None else torch.flatten(x, 1)
    for n, fc in fcs[:-1]:
        x = fc(x) if n == linear_after else activation(fc(x))
    return fcs[-1][1](x)


def _channels_last_flatten(x: torch.Tensor) -> torch.Tensor:
    return x.permute(0, 2, 3, 1).reshape(x.shape[0], -1)


def _hidden_layers(net: nn.Module) -> list[str]:
    """The layers followed by a ReLU in the task's network: every conv and every fc but the last."""
    names = [n for n, _ in net.named_children() if n.startswith(("conv", "fc"))]
    return names[:-1]


def _forward_mistakes(reference: nn.Module, x: torch.Tensor) -> list[Mistake]:
    logits = lambda: reference(x)  # noqa: E731
    return [
        Mistake("you flattened the batch dimension too (the output lost its batch dimension): "
                "use torch.flatten(x, 1), which keeps dimension 0", lambda: reference(x)[0],
                where="look at the flatten between the convolutions and the first Linear: which dims it merges"),
        Mistake("forward should return the raw logits: drop the softmax at the end "
                "(CrossEntropyLoss applies log-softmax itself)", lambda: F.softmax(logits(), dim=1),
                where="look at the last lines of forward: what happens after the last layer?"),
        Mistake("forward should return the raw logits: drop the log_softmax at the end "
                "(CrossEntropyLoss applies log-softmax itself)", lambda: F.log_softmax(logits(), dim=1),
                where="look at the last lines of forward: what happens after the last layer?"),
        Mistake("there should be no ReLU after the last layer: logits may be negative", lambda: F.relu(logits()),
                where="look at the last lines of forward: what happens after the last layer?"),
        Mistake("there is no ReLU between the layers: without a nonlinearity the layers collapse into one "
                "linear map; apply F.relu after every layer except the last",
                lambda: _conv_net_variant(reference, x, activation=lambda t: t),
                where="look at what forward does between one layer and the next"),
        *[Mistake(f"the activation between the layers is {name}; the task's network applies F.relu after every "
                  "layer except the last", (lambda act=act: _conv_net_variant(reference, x, activation=act)),
                  where="look at the function forward applies between one layer and the next")
          for name, act in (("a sigmoid", torch.sigmoid), ("tanh", torch.tanh), ("a leaky ReLU", F.leaky_relu),
                            ("GELU", F.gelu), ("ELU", F.elu))],
        Mistake("use max pooling (F.max_pool2d(x, 2) or nn.MaxPool2d(2)), not average pooling",
                lambda: _conv_net_variant(reference, x, pool=F.avg_pool2d),
                where="look at the pooling step of forward"),
        Mistake("you flattened the feature maps channels-last (height, width, channel order, as in Keras/TensorFlow); "
                "PyTorch's maps are [N, C, H, W], and fc1's weights expect torch.flatten(x, 1) of that order",
                lambda: _conv_net_variant(reference, x, flatten=_channels_last_flatten),
                where="look at how forward flattens the last feature maps"),
        *[Mistake(f"the ReLU after {layer} is missing: apply F.relu after every layer except the last",
                  (lambda layer=layer: _conv_net_variant(reference, x, linear_after=layer)),
                  where=f"look at what forward does with {layer}'s output")
          for layer in _hidden_layers(reference)],
    ]


def _model_mistakes(model: nn.Module, x: torch.Tensor) -> list[Mistake]:
    """Mistakes read off the learner's model itself rather than off its output."""
    return [Mistake("your model has a Dropout layer the task does not ask for: dropout zeroes random values "
                    "while the model is in training mode, so the output changes from call to call",
                    matches=lambda got: any(isinstance(m, nn.modules.dropout._DropoutNd) for m in model.modules()),
                    where="look at the layers your __init__ builds, compared with the task's list"),
            Mistake("your forward gives a different output for the same input on every call, even in eval mode: it "
                    "draws random numbers itself, and the task's network has nothing random. "
                    + FUNCTIONAL_DROPOUT_IN_EVAL,
                    matches=lambda got: differs_between_calls(model, x, eval_mode=True).dropout_on,
                    where="look for a dropout function in forward"),
            Mistake("your forward gives a different output for the same input on every call, even in eval mode: it "
                    "draws random numbers itself (torch.rand, torch.randn...), and the task's network has nothing "
                    "random", matches=lambda got: differs_between_calls(model, x, eval_mode=True),
                    where="look for randomness in forward")]


def _check_layers(cls: Any, name: str, reference_cls: Callable[[], nn.Module], size: int,
                  batch_sizes: Sequence[int]) -> None:
    model = _build(cls, name)
    reference = _seeded(reference_cls, 0)
    for n in batch_sizes:
        out, _ = _run(model, _randn(n, 1, size, size, seed=n), name, reference)
        expect(isinstance(out, torch.Tensor), f"{name}'s forward returned {describe(out)}; expected a tensor",
               where="look at forward's return statement")
        expect(list(out.shape) == [n, 10],
               f"{name}'s output for a batch of {n} images of {size}x{size} has shape {list(out.shape)}; expected "
               f"[{n}, 10] (one row of 10 logits per image)",
               where=("look at what in forward can drop dimension 0 when it has size 1: the flatten, and any "
                      "squeeze() (the last line included)" if n == 1 and list(out.shape) == [10] else
                      "look at how forward flattens"),
               mistake=logits_shape_mistake(out.shape, n, 10))
    _expect_same_layers(model, reference, name, _randn(2, 1, size, size, seed=2))
    passed(f"{name} layers ({ref.count_parameters(reference):,} parameters)", len(batch_sizes) + 1)


def _expect_no_randomness_in_eval(model: nn.Module, x: torch.Tensor, name: str) -> None:
    """The task's network has nothing random: in eval mode two calls on the same input agree. A dropout function
    called with training=True in eval mode (F.dropout's default) is named when it is seen."""
    calls = differs_between_calls(model, x, eval_mode=True)
    if not calls:
        return
    raise CheckError(
        f"{name}(x of shape {list(x.shape)}), with the reference's weights, gave different outputs in two calls on "
        "the same input, even in eval mode; expected the same output on every call (the task's network "
        "has nothing random)",
        where="look for a dropout function in forward" if calls.dropout_on else
        "look for randomness in forward: a dropout, or a random draw (torch.rand, torch.randn...)",
        mistake=f"forward calls a dropout function that stays on in eval mode. {FUNCTIONAL_DROPOUT_IN_EVAL}. The "
                "task's network has no dropout: remove it" if calls.dropout_on else None)


def _check_forward(cls: Any, name: str, reference_cls: Callable[[], nn.Module],
                   inputs: Sequence[torch.Tensor]) -> None:
    model = _build(cls, name)
    reference = _seeded(reference_cls, 0)
    for x in inputs:
        _run(model, x.clone(), name, reference)  # with the learner's own weights first: a shape error names its layer
        _expect_same_layers(model, reference, name, x)
        model.load_state_dict(reference.state_dict())
        with torch.random.fork_rng():  # a fixed seed: a model that draws random numbers fails the same way each run
            torch.manual_seed(0)
            out, fired = _run(model, x.clone(), name, reference)
        want = reference(x)  # with its graph, as a model's output has: the graph rule compares like with like
        _expect_hooks_ran(model, fired, same_value(out, want), name)
        _expect_no_randomness_in_eval(model, x, name)
        expect_tensor(out, want, what=f"{name}(x of shape {list(x.shape)}) with the reference's weights",
                      mistakes=_forward_mistakes(reference, x) + _model_mistakes(model, x)
                      + _trace_mistakes(model, reference, x))
    passed(f"{name} forward", len(inputs))


def check_lenet_layers(cls: Any, inputs: Sequence[int] | None = None) -> None:
    """LeNet's layers: output [N, 10] for 32x32 inputs, state_dict keys and shapes, 61,706 parameters."""
    _check_layers(cls, "LeNet", ref.LeNet, 32, inputs if inputs is not None else [4, 1])


def check_lenet_forward(cls: Any, inputs: Sequence[torch.Tensor] | None = None) -> None:
    """LeNet's forward, with the reference's weights loaded, matches the reference's output."""
    inputs = inputs if inputs is not None else [_randn(4, 1, 32, 32, seed=1), _randn(2, 1, 32, 32, seed=2) * 3]
    _check_forward(cls, "LeNet", ref.LeNet, inputs)


def check_mnist_net_layers(cls: Any, inputs: Sequence[int] | None = None) -> None:
    """MnistNet's layers: output [N, 10] for 28x28 inputs, state_dict keys and shapes, 431,080 parameters."""
    _check_layers(cls, "MnistNet", ref.MnistNet, 28, inputs if inputs is not None else [3, 1])


def check_mnist_net_forward(cls: Any, inputs: Sequence[torch.Tensor] | None = None) -> None:
    """MnistNet's forward, with the reference's weights loaded, matches the reference's output."""
    inputs = inputs if inputs is not None else [
        _randn(3, 1, 28, 28, seed=3),
        _randn(5, 1, 28, 28, seed=4).abs(),
    ]
    # No channels_last input: the task never mentions memory formats, so every flattening that keeps the
    # batch dimension (view, reshape, torch.flatten, nn.Flatten) is correct for the inputs it names.
    _check_forward(cls, "MnistNet", ref.MnistNet, inputs)


# --- exercise 3: counting parameters -------------------------------------------------------------

def _bn_model() -> nn.Module:
    return nn.Sequential(nn.Conv2d(1, 4, 3, bias=False), nn.BatchNorm2d(4), nn.ReLU(), nn.Flatten(),
                         nn.Linear(4 * 6 * 6, 3))


def _frozen_bn_model() -> nn.Module:
    model = _bn_model()
    model[0].requires_grad_(False)  # a frozen first layer, as in fine-tuning
    return model


class _Gain(nn.Module):
    """A layer whose only parameter is not called weight or bias."""

    def __init__(self, size: int) -> None:
        super().__init__()
        self.gain = nn.Parameter(torch.ones(size))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * self.gain


class _ScaledClassifier(nn.Module):
    """Layers nested in a Sequential, one of them with a parameter called neither weight nor bias, plus a parameter
    of the model's own (a learnable temperature): each way of walking only part of the model gives another count."""

    def __init__(self) -> None:
        super().__init__()
        self.body = nn.Sequential(nn.Linear(6, 5), nn.ReLU(), nn.Linear(5, 3), _Gain(3))
        self.temperature = nn.Parameter(torch.ones(3))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.body(x) / self.temperature


class _TiedDecoder(nn.Module):
    """An embedding and an output layer that share one weight (weight tying, as in language models): the shared
    Parameter is one set of numbers and counts once."""

    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(7, 4)
        self.hidden = nn.Linear(4, 4)
        self.out = nn.Linear(4, 7)
        self.out.weight = self.embed.weight  # the same Parameter object in two modules

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.out(F.relu(self.hidden(self.embed(tokens))))


def _contents(model: nn.Module) -> str:
    """What the model holds, for a message: each parameter's dotted name and size (a few, when many), and the
    ones shared by several modules."""
    named = list(model.named_parameters())
    listed = ", ".join(f"{n} ({p.numel():,}{'' if p.requires_grad else ', frozen'})" for n, p in named[:8])
    listed += ", ..." if len(named) > 8 else ""
    tied = _tied(model)
    return f"model.named_parameters() lists {listed}" + (
        f"; {' and '.join(tied)} are one shared Parameter" if tied else "")


def _tied(model: nn.Module) -> list[str]:
    """The dotted names under which one Parameter object is held by several modules."""
    every = list(model.named_parameters(remove_duplicate=False))
    return [n for n, p in every if sum(q is p for _, q in every) > 1]


def _partial_walks(model: nn.Module, trainable_only: bool) -> list[tuple[str, int, list[str]]]:
    """Ways of walking the model that miss some parameters: (what was walked, its count, the parameters missed)."""
    def count(params: Any) -> tuple[int, list[int]]:
        chosen = [p for p in params if p.requires_grad or not trainable_only]
        return sum(p.numel() for p in chosen), [id(p) for p in chosen]

    children = list(model.children())
    walks = {
        "only the parameters registered on the model itself (parameters(recurse=False))":
            model.parameters(recurse=False),
        "only the own parameters of the model's direct children (children(), each with recurse=False), not "
        "those nested deeper":
            (p for c in children for p in c.parameters(recurse=False)),
        "only the model's direct children, not the parameters registered on the model itself":
            (p for c in children for p in c.parameters()),
        "only the layers without submodules (the leaves), not the parameters registered on the model itself":
            (p for m in model.modules() if not any(True for _ in m.children()) and m is not model
             for p in m.parameters(recurse=False)),
    }
    everything = {id(p): n for n, p in model.named_parameters()}
    walked = []
    for description, params in walks.items():
        total, seen = count(params)
        missed = [n for i, n in everything.items() if i not in seen]
        walked.append((description, total, missed))
    return walked


def _scaled_classifier_float64() -> nn.Module:
    """A model in float64 (8 bytes a number): counting bytes / 4 as numbers gives twice the count."""
    return _ScaledClassifier().double()


class _OneWalk:
    """The generator model.parameters() returns, noting a walk started after it was used up: a generator can be
    walked once, so a second loop over it sees nothing."""

    def __init__(self, params: Iterator[nn.Parameter], reused: list[bool]) -> None:
        self.params, self.reused, self.done = params, reused, False

    def __iter__(self) -> "_OneWalk":
        if self.done:
            self.reused[0] = True
        return self

    def __next__(self) -> nn.Parameter:
        try:
            return next(self.params)
        except StopIteration:
            self.done = True
            raise


@contextlib.contextmanager
def _watching_parameter_walks(model: nn.Module) -> Iterator[list[bool]]:
    """While open, ``model.parameters()`` returns a :class:`_OneWalk`; yields [whether one was walked again]."""
    reused = [False]
    model.parameters = lambda *args, **kwargs: _OneWalk(nn.Module.parameters(model, *args, **kwargs), reused)
    try:
        yield reused
    finally:
        del model.parameters


def _bytes_over_four(params: Sequence[nn.Parameter]) -> int:
    """The count that bytes / 4 gives, right only where every parameter is float32 (4 bytes a number)."""
    if all(p.dtype == torch.float32 for p in params):
        return _not_this_mistake()
    return sum(p.nbytes // 4 for p in params)


def check_count_parameters(fn: Callable[[nn.Module, bool], int],
                           inputs: Sequence[tuple[ModelFactory, bool]] | None = None) -> None:
    inputs = inputs if inputs is not None else [(ref.MnistNet, False), (_frozen_bn_model, False),
                                                (_frozen_bn_model, True), (_scaled_classifier_float64, False),
                                                (_TiedDecoder, False)]
    for factory, trainable_only in inputs:
        model = _seeded(factory, 0)
        kind = type(model).__name__
        frozen = sum(p.numel() for p in model.parameters() if not p.requires_grad)
        dtypes = sorted({str(p.dtype).removeprefix("torch.") for p in model.parameters()})
        in_dtype = f" in {', '.join(dtypes)}" if dtypes and dtypes != ["float32"] else ""
        what = (f"count_parameters({kind}{in_dtype}{' with a frozen layer' if frozen else ''}, "
                f"trainable_only={trainable_only})")
        # the watch is an attribute on the model: only where the learner's code runs here (in the grader, the
        # model is sent to the kernel, whose own run of this check watches it)
        with _watching_parameter_walks(model) if runs_here(fn) else contextlib.nullcontext([False]) as walked_again:
            got = call(fn, model, trainable_only=trainable_only)
        want = ref.count_parameters(model, trainable_only)
        chosen = [p for p in model.parameters() if p.requires_grad or not trainable_only]
        largest = max(model.named_parameters(), key=lambda item: item[1].dim(), default=("", torch.zeros(1)))
        mistakes = [
            Mistake("model.parameters() returns a generator, which can be walked only once: your second loop over "
                    "the same generator saw no parameters at all. Call model.parameters() again for each walk, or "
                    "keep a list, params = list(model.parameters())",
                    matches=lambda _: walked_again[0],
                    where="look at where your function loops over model.parameters() a second time"),
            Mistake("bytes / 4 counts the numbers only in a float32 tensor (4 bytes each); these parameters are "
                    f"{', '.join(dtypes)}. Use p.numel(), the number of elements whatever the dtype",
                    lambda: _bytes_over_four(chosen),
                    where="look at what you add up for each parameter"),
            Mistake(f"len(p) is the size of a tensor's first dimension only (for {largest[0]}, shape "
                    f"{list(largest[1].shape)}: {len(largest[1]) if largest[1].dim() else 1}), not its number of "
                    "elements: use p.numel()",
                    lambda: sum(len(p) for p in chosen) if largest[0] else _not_this_mistake(),
                    where="look at what you add up for each parameter"),
            Mistake("you counted parameter tensors, not the numbers in them: add up p.numel() for every p",
                    lambda: len(list(model.parameters())),
                    where="look at what you add up for each parameter"),
            Mistake("state_dict() also holds buffers (BatchNorm's running_mean, running_var and "
                    "num_batches_tracked), which are not parameters: count model.parameters()",
                    lambda: sum(v.numel() for v in model.state_dict().values())
                    if any(True for _ in model.buffers()) else _not_this_mistake(),
                    where="look at where your parameters come from: model.parameters(), or the state_dict?"),
            Mistake("with trainable_only=True, skip the parameters whose requires_grad is False (frozen layers)",
                    lambda: ref.count_parameters(model) if trainable_only else _not_this_mistake(),
                    where="look at how trainable_only decides which parameters count"),
            Mistake("with trainable_only=False count every parameter, frozen ones included; you skipped the "
                    "frozen ones",
                    lambda: ref.count_parameters(model, True) if not trainable_only else _not_this_mistake(),
                    where="look at how trainable_only decides which parameters count"),
            Mistake("you skipped the biases: every parameter tensor counts",
                    lambda: sum(p.numel() for n, p in model.named_parameters()
                                if n.endswith("weight") and (p.requires_grad or not trainable_only)),
                    where="look at which parameters your loop skips"),
            Mistake("with trainable_only=True you counted the frozen parameters (requires_grad False); count those "
                    "whose requires_grad is True",
                    lambda: frozen if trainable_only and frozen else _not_this_mistake(),
                    where="look at the test on requires_grad: which parameters does it keep?"),
            Mistake("you counted nested parameters several times: a module's parameters() already includes its "
                    "submodules', so looping over model.modules() and asking each for parameters() counts a layer "
                    "once for every module that contains it. model.parameters() lists each parameter once",
                    lambda: sum(p.numel() for m in model.modules() for p in m.parameters()
                                if p.requires_grad or not trainable_only),
                    where="look at how your loop walks the model: does each parameter come up once?"),
            Mistake("you counted only the attributes called weight and bias of each module; a model may hold other "
                    f"parameters ({', '.join(n for n, _ in model.named_parameters() if not n.endswith(('weight', 'bias')))}"
                    "): model.parameters() lists them all",
                    lambda: sum(getattr(m, k).numel() for m in model.modules() for k in ("weight", "bias")
                                if isinstance(getattr(m, k, None), nn.Parameter)
                                and (getattr(m, k).requires_grad or not trainable_only))
                    if any(not n.endswith(("weight", "bias")) for n, _ in model.named_parameters())
                    else _not_this_mistake(),
                    where="look at which attributes of each module you count"),
            Mistake(f"a Parameter shared by two modules (tied weights: here {' and '.join(_tied(model))}) is one set "
                    "of numbers, but you counted it under each of its names (a walk over model.modules() with "
                    "recurse=False, named_parameters(remove_duplicate=False) and state_dict() all list it twice). "
                    "model.parameters() lists each Parameter once",
                    lambda: sum(p.numel() for _, p in model.named_parameters(remove_duplicate=False)
                                if p.requires_grad or not trainable_only),
                    where="look at how your loop walks the model: does a Parameter held by two modules come up "
                          "twice?"),
            Mistake("you counted none of the model's parameters. "
                    + ("With trainable_only=False every parameter counts: look at the test that picks them "
                       "(`p.requires_grad == trainable_only` keeps only frozen ones, p.grad is None until a "
                       "backward, and the tensors of state_dict() are detached, so their requires_grad is False)"
                       if not trainable_only else
                       f"{want:,} of them are trainable: look at the test that picks them (p.grad is None until a "
                       "backward, and the tensors of state_dict() are detached, so their requires_grad is False: "
                       "ask model.parameters())")
                    + "".join(f"; or at the walk: {walk} give none here" for walk, total, missed
                              in _partial_walks(model, trainable_only) if missed and total == 0),
                    lambda: 0 if want else _not_this_mistake(),
                    where="look at which parameters your function keeps"),
            Mistake(f"with trainable_only=False you counted only the frozen parameters (requires_grad False, {frozen:,} "
                    "numbers): every parameter counts then. A test `p.requires_grad == trainable_only` keeps the "
                    "frozen ones; skip a parameter only when trainable_only is True and it is frozen",
                    lambda: frozen if not trainable_only and frozen else _not_this_mistake(),
                    where="look at the test on requires_grad: which parameters does it keep?"),
            *[Mistake(f"you counted {walk}: {', '.join(missed[:4])}{', ...' if len(missed) > 4 else ''} "
                      "went uncounted. model.parameters() reaches every parameter, at any depth, the model's own "
                      "included", lambda total=total: total, where="look at which modules your loop visits")
              for walk, total, missed in _partial_walks(model, trainable_only) if missed],
        ]
        if isinstance(got, np.generic) and got == want:
            raise CheckError(f"{what} returned {describe(got)} ({type(got).__name__}); expected a Python int "
                             f"({want:,})", where="look at the type of what you add up and return",
                             mistake="NumPy's sum and prod return NumPy numbers: return int(...), or add up "
                                     "p.numel(), which is already an int")
        if isinstance(got, torch.Tensor) and got.numel() == 1 and got.item() == want:
            raise CheckError(f"{what} returned {describe(got)}; expected a Python int ({want:,})",
                             where="look at the type of what you add up and return",
                             mistake="return a plain Python int (numel() is already an int)")
        if not isinstance(got, torch.Tensor) and got != want:  # a tensor of counts is named just below
            mistake = next((m for m in mistakes if m.explains(got)), None)
            if mistake is not None:
                raise CheckError(f"{what} returned {got:,}; expected {want:,} ({_contents(model)})",
                                 where=mistake.where or "look at which tensors you count, and what you count in each",
                                 mistake=mistake.message)
        expect(isinstance(got, int) and not isinstance(got, bool),
               f"{what} returned {describe(got)}; expected an int", where="look at what your function returns")
        expect(got == want, f"{what} returned {got:,}; expected {want:,} ({_contents(model)})",
               where="look at which tensors you count, and what you count in each")
    passed("count_parameters", len(inputs))


# --- exercise 4: weight initialisation -----------------------------------------------------------

def _init_model() -> nn.Module:
    return nn.Sequential(nn.Conv2d(1, 4, 3), nn.BatchNorm2d(4), nn.ReLU(), nn.Conv2d(4, 6, 3, bias=False),
                         nn.ReLU(), nn.Flatten(), nn.Linear(6 * 4 * 4, 10))


def _off_default(model: nn.Module, seed: int) -> nn.Module:
    """Give every module other than Conv2d and Linear parameters and float buffers unlike a fresh module's
    (BatchNorm's bias 0, weight 1, running stats 0 and 1), so that an init which overwrites them with
    those defaults is seen to change them. Values in [0.5, 1.5): valid for variances too."""
    g = torch.Generator().manual_seed(1000 + seed)
    with torch.no_grad():
        for module in model.modules():
            if isinstance(module, (nn.Conv2d, nn.Linear)):
                continue
            own = [*module.parameters(recurse=False), *module.buffers(recurse=False)]
            for tensor in own:
                if tensor.is_floating_point():
                    tensor.copy_(torch.rand(tensor.shape, generator=g) + 0.5)
    return model


def _state_after(factory: ModelFactory, init: Callable[[nn.Module], Any] | None, seed: int) -> dict[str, torch.Tensor]:
    model = _off_default(_seeded(factory, seed), seed)
    if init is not None:
        with torch.random.fork_rng():
            torch.manual_seed(seed + 1)
            model.apply(init)
    return {k: v.clone() for k, v in model.state_dict().items()}


def _init_looping_modules(module: nn.Module) -> None:
    for m in module.modules():
        ref.init_weights(m)


def _init_variant(weight_init: Callable[[torch.Tensor], Any]) -> Callable[[nn.Module], None]:
    def init(module: nn.Module) -> None:
        if isinstance(module, (nn.Conv2d, nn.Linear)):
            weight_init(module.weight)
            if module.bias is not None:
                nn.init.zeros_(module.bias)
    return init


_INIT_VARIANTS = [
    (_init_variant(nn.init.kaiming_uniform_), "you used kaiming_uniform_; the task asks for nn.init.kaiming_normal_"),
    (_init_variant(lambda w: nn.init.kaiming_normal_(w, mode="fan_out", nonlinearity="relu")),
     "you used mode='fan_out'; keep the default mode='fan_in', which preserves the scale of activations going forward"),
    (_init_variant(nn.init.xavier_normal_), "that is Xavier (Glorot) initialisation; the task asks for "
                                             "nn.init.kaiming_normal_, which suits ReLU networks"),
    (_init_variant(nn.init.xavier_uniform_), "that is Xavier (Glorot) initialisation; the task asks for "
                                              "nn.init.kaiming_normal_, which suits ReLU networks"),
    *[(_init_variant(lambda w, init=init: init(w, gain=nn.init.calculate_gain("relu"))),
       f"that is Xavier (Glorot) initialisation ({init.__name__}) with ReLU's gain sqrt(2): its std, gain x "
       "sqrt(2 / (fan_in + fan_out)), averages the inputs and outputs per unit, where Kaiming's, sqrt(2 / fan_in), "
       "takes fan_in alone (the two agree only when fan_in equals fan_out). Use nn.init.kaiming_normal_(m.weight, "
       "nonlinearity=\"relu\")") for init in (nn.init.xavier_normal_, nn.init.xavier_uniform_)],
    (_init_looping_modules, "model.apply already calls your function once for every module: do not loop over "
                            "module.modules() inside it (each layer was initialised several times)"),
]


def _describe_init_failure(error: Exception) -> str:
    text = str(error)
    if isinstance(error, AttributeError) and "NoneType" in text:
        return ("some layers are built with bias=False, so their m.bias is None: "
                "guard the bias line with `if m.bias is not None:`")
    if "ambiguous" in text:
        return "`if m.bias:` asks a whole tensor for True/False; test `if m.bias is not None:` instead"
    return ""


def _init_one(fn: Callable[[nn.Module], None], module: nn.Module) -> None:
    """One visit of ``model.apply(fn)``, through the framework's rules."""
    # task: "every nn.Conv2d and nn.Linear has Kaiming-normal weights [...] and zero biases": the module is
    # changed in place, its weights drawn from the global generator (reseeding it is still named); "every
    # other kind of module is left exactly as it was" is compared by the check afterwards
    call(fn, module, allow=Allow(changed=(module,), global_rng="draws"))


def _expect_same_parameters(model: nn.Module, originals: dict[str, nn.Parameter], kind: str,
                            tensors: dict[str, torch.Tensor]) -> None:
    """The task: init_weights changes the layers' parameters in place, so every parameter is still the object it
    was (an optimizer built before holds those objects), with its requires_grad unchanged, and with its dtype and
    device (``tensors``: each parameter's data before). A same-dtype tensor swapped in through ``.data`` is accepted:
    the optimizer's Parameter objects are kept."""
    now = dict(model.named_parameters())
    for key, original in originals.items():
        current = now.get(key)
        layer, _, attribute = key.rpartition(".")
        old = tensors[key]
        moved = [f"{what} {getattr(old, what)} -> {getattr(current, what)}" for what in ("dtype", "device")
                 if current is original and getattr(old, what) != getattr(current, what)]
        if moved:
            raise CheckError(
                f"{kind}.apply(init_weights): '{key}' is still the layer's own Parameter, but it now holds a new tensor "
                f"of another {' and '.join(m.split()[0] for m in moved)} ({'; '.join(moved)}); expected its own "
                "tensor, filled in place",
                where=f"look at how init_weights sets the {attribute} of "
                      + (f"layer '{layer}'" if layer else "the layer") + f": an assignment to module.{attribute}.data "
                      "swaps in the tensor you built, with that tensor's dtype and device",
                mistake=f"`module.{attribute}.data = ...` with a tensor made by torch.empty(shape), torch.zeros(shape) "
                        "(or torch.randn(shape)) puts a float32 tensor on the CPU in the layer, whatever its dtype "
                        "and device (a model on the GPU gets CPU weights). Fill the parameter itself: "
                        f"nn.init.kaiming_normal_(module.weight, nonlinearity=\"relu\"), nn.init.zeros_(module.bias)")
        if current is not original:
            raise CheckError(
                f"{kind}.apply(init_weights): '{key}' is " + ("gone" if current is None else "a new Parameter object")
                + " after init_weights; expected the layer's own Parameter, with its values changed in place",
                where=f"look at how init_weights sets the {attribute} of layer '{layer}': assigning module.{attribute} "
                      "= ... replaces the Parameter instead of filling it",
                mistake="an optimizer built before keeps updating the old tensor, and a replaced Parameter comes back "
                        "with requires_grad=True even when the layer was frozen: fill the existing one in place with "
                        "the nn.init functions (nn.init.zeros_(module.bias))")
        if current.requires_grad != original.requires_grad:
            raise CheckError(f"{kind}.apply(init_weights): '{key}' has requires_grad={current.requires_grad} after "
                             f"init_weights, {original.requires_grad} before; expected it unchanged",
                             where=f"look at what init_weights does to layer '{layer}' besides its values")


def _single_layer() -> nn.Module:
    return nn.Linear(6, 3)


def _embedding() -> nn.Module:
    return nn.Embedding(12, 5)


def _other_convolutions() -> nn.Module:
    """Convolutions that are not Conv2d: the task leaves them as they are."""
    return nn.Sequential(nn.Conv1d(2, 3, 3), nn.Conv3d(1, 2, 2), nn.ConvTranspose2d(2, 2, 3))


@contextlib.contextmanager
def _init_targets(seen: list[torch.Tensor]) -> Iterator[None]:
    """Record the tensor each nn.init function (kaiming_normal_, zeros_, ...) is given while open."""
    def spying(real: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(real)
        def spy(tensor: Any, *args: Any, **kwargs: Any) -> Any:
            seen.append(tensor)
            return real(tensor, *args, **kwargs)
        return spy

    names = [n for n in dir(nn.init) if n.endswith("_") and not n.startswith("_") and callable(getattr(nn.init, n))]
    with contextlib.ExitStack() as stack:
        for name in names:
            stack.enter_context(mock.patch.object(nn.init, name, spying(getattr(nn.init, name))))
        yield


def check_init_weights(fn: Callable[[nn.Module], None], inputs: Sequence[ModelFactory] | None = None) -> None:
    """``model.apply(fn)`` must give Kaiming-normal Conv2d/Linear weights, zero biases, other layers untouched."""
    inputs = inputs if inputs is not None else [_init_model, ref.LeNet]
    # and a layer on its own: layer.apply(fn) calls fn on the layer itself, which must initialise it; and a layer
    # with a weight that is neither (an embedding), which must stay as it was
    for seed, factory in enumerate([*inputs, _single_layer, _embedding, _other_convolutions]):
        model = _off_default(_seeded(factory, seed), seed)
        kind = type(model).__name__
        before = {k: v.clone() for k, v in model.state_dict().items()}
        originals = dict(model.named_parameters())  # the objects themselves: held, so that no id is reused
        tensors = {k: p.detach() for k, p in originals.items()}  # their data before: dtype and device
        with warnings.catch_warnings(record=True) as caught, torch.random.fork_rng():
            warnings.simplefilter("always")
            torch.manual_seed(seed + 1)
            initialised: list[torch.Tensor] = []
            try:
                with _init_targets(initialised):
                    model.apply(lambda module: _init_one(fn, module))
            except CheckError as error:
                if not isinstance(error.__cause__, Exception):
                    raise  # not written yet, or a rule of the framework broken: its own message
                cause = error.__cause__
                why = _describe_init_failure(cause)
                raise CheckError(f"{kind}.apply(init_weights) raised {type(cause).__name__}: {cause}",
                                 where="look at the lines of init_weights that touch m.weight and m.bias: which "
                                       "modules reach them (model.apply calls it on every module) and what they hold",
                                 mistake=why or None) from cause
        deprecated = [str(w.message) for w in caught if "deprecated" in str(w.message) and "nn.init" in str(w.message)]
        expect(not deprecated,
               f"init_weights made PyTorch warn that a function is deprecated: {deprecated[0] if deprecated else None}",
               where="look at the names of the nn.init functions you call",
               mistake="you used a deprecated init function without the trailing underscore: the in-place versions "
                       "(nn.init.kaiming_normal_, nn.init.zeros_) are the current API")
        _expect_same_parameters(model, originals, kind, tensors)
        got = model.state_dict()
        want = _state_after(factory, ref.init_weights, seed)
        if same_value(dict(got), want):
            continue
        what = f"{kind}.apply(init_weights)"
        modules = dict(model.named_modules())
        for key, value in got.items():
            layer, _, kind_of = key.rpartition(".")
            module = modules[layer]
            changed = not torch.equal(value, before[key])
            if isinstance(module, (nn.Conv2d, nn.Linear)):
                if kind_of == "bias" and not torch.equal(value, torch.zeros_like(value)):
                    raise CheckError(f"{what}: the biases should be zeros, but '{key}' is not"
                                     + (" (it kept its default values)" if not changed else ""),
                                     where=f"look at what init_weights does to m.bias (layer '{layer}', a "
                                           f"{type(module).__name__})",
                                     mistake="your init ignores the biases: set them to zero with "
                                             "nn.init.zeros_(m.bias)" if not changed else None)
                if kind_of == "weight" and not changed:
                    params = {id(p) for p in model.parameters()}
                    copies = any(id(t) not in params for t in initialised) \
                        and all(t is not module.weight for t in initialised)
                    raise CheckError(f"{what}: the {type(module).__name__} layer "
                                     f"{repr(layer) if layer else 'itself'} kept its default weights"
                                     + (", though your nn.init calls ran: on other tensors than the layers' own"
                                        if copies else ""),
                                     where="look at the tensor you give the nn.init functions" if copies else
                                     "look at the condition that picks the modules init_weights changes",
                                     mistake="an nn.init function changes the tensor it is given, in place: "
                                             "m.weight.clone() (or .data.clone(), or a new tensor) is a copy, and "
                                             "the layer keeps its own weight. Pass m.weight itself" if copies else
                                             "initialise every nn.Conv2d and nn.Linear "
                                             "(isinstance(m, (nn.Conv2d, nn.Linear)))")
            elif changed and kind_of in dict(module.named_parameters(recurse=False)):
                raise CheckError(f"{what}: you changed '{key}' of an nn.{type(module).__name__}",
                                 where="look at the condition that picks the modules init_weights changes",
                                 mistake="only Conv2d and Linear layers should be re-initialised "
                                         + ("(a BatchNorm starts with weight 1 and bias 0)" if isinstance(module, _BN_TYPES)
                                            else f"(an nn.{type(module).__name__} is another kind of convolution: "
                                                 "pick exactly nn.Conv2d and nn.Linear, isinstance(m, (nn.Conv2d, "
                                                 "nn.Linear)), not every convolution)"
                                            if isinstance(module, nn.modules.conv._ConvNd) else
                                            "(pick them by their type, isinstance(m, (nn.Conv2d, nn.Linear)), "
                                            "not by having a weight)"))
            elif changed and kind_of in dict(module.named_buffers(recurse=False)):
                raise CheckError(f"{what}: the buffer '{key}' of a {type(module).__name__} changed; expected every "
                                 "module other than Conv2d and Linear left exactly as it was, buffers included",
                                 where=f"look at what your function does to a module that is a "
                                       f"{type(module).__name__}",
                                 mistake="only Conv2d and Linear layers are re-initialised: reset nothing else "
                                         "(a BatchNorm's running statistics are what it has learnt from the data)")
        for variant, message in _INIT_VARIANTS:
            if same_value(dict(got), _state_after(factory, variant, seed)):
                raise CheckError(f"{what}: the weights are not those nn.init.kaiming_normal_ gives under the same seed",
                                 where="look at which nn.init function you call and its arguments (mode=), and "
                                       "how often it runs for each layer", mistake=message)
        for key, value in want.items():
            expect_tensor(got[key], value, what=f"{what}: '{key}' (nn.init.kaiming_normal_ under the same seed)",
                          mistakes=_fan_in_mistakes(modules[key.rpartition(".")[0]], value))
    _expect_dtype_kept(fn)
    passed("init_weights", len(inputs))


def _float64_layer() -> nn.Module:
    return nn.Linear(6, 3).double()


def _expect_dtype_kept(fn: Callable[[nn.Module], None]) -> None:
    """A layer in float64 keeps its dtype through init_weights: a tensor swapped in through ``.data``, made without
    the parameter's dtype and device (torch.empty(shape)), shows here, where float32 layers cannot show it. Only
    the parameters are compared: the values drawn in float64 are another stream than in float32."""
    layer = _seeded(_float64_layer, 5)
    originals = dict(layer.named_parameters())
    tensors = {k: p.detach() for k, p in originals.items()}
    with torch.random.fork_rng():
        torch.manual_seed(6)
        layer.apply(lambda module: _init_one(fn, module))
    _expect_same_parameters(layer, originals, "Linear(6, 3) in float64", tensors)


def _fan_in_mistakes(module: nn.Module, want: torch.Tensor) -> list[Mistake]:
    """A Kaiming std computed by hand with a convolution's fan_in as its input channels only (weight.shape[1]):
    every weight is sqrt(kernel height × width) times too large."""
    if not isinstance(module, nn.Conv2d) or want.dim() != 4 or want.shape[2:].numel() == 1:
        return []
    factor = math.sqrt(want.shape[2:].numel())
    return [Mistake(f"every weight is {factor:g} times too large, the square root of the kernel's "
                    f"{want.shape[2]}x{want.shape[3]} size: a convolution's fan_in is in_channels × kernel height "
                    "× kernel width (m.weight[0].numel()), not m.weight.shape[1] alone. "
                    "nn.init.kaiming_normal_ computes it for you",
                    lambda: want * factor,
                    where="look at how you compute fan_in (or the std) for a Conv2d layer")]


# --- exercises 5 and 6: a custom loss ------------------------------------------------------------

def _smoothing_mistakes(logits: torch.Tensor, targets: torch.Tensor, smoothing: float, reduction: str) -> list[Mistake]:
    def reduce(loss: torch.Tensor, how: str = reduction) -> torch.Tensor:
        return {"mean": loss.mean, "sum": loss.sum, "none": lambda: loss}[how]()

    log_probs = F.log_softmax(logits, dim=1)
    nll = -log_probs.gather(1, targets.unsqueeze(1)).squeeze(1)
    n_classes = logits.shape[1]
    others = (-log_probs.sum(dim=1) - nll) / (n_classes - 1)
    return [
        Mistake("the result is inf or nan: log(softmax(x)) underflows to log(0) = -inf when one logit is much larger "
                "than the others. Use F.log_softmax(logits, dim=1), which computes it stably",
                matches=lambda got: isinstance(got, torch.Tensor) and not bool(torch.isfinite(got).all()),
                where="look at how you get the log-probabilities from the logits"),
        Mistake("you ignored smoothing: that is the plain cross-entropy",
                lambda: reduce(nll) if smoothing != 0 else _not_this_mistake(),
                where="look at where smoothing enters the loss"),
        Mistake("you spread the smoothing over the C - 1 wrong classes only; label smoothing gives every class, the "
                "target included, smoothing / C: the target is (1 - smoothing) * one_hot + smoothing / C",
                lambda: reduce((1 - smoothing) * nll + smoothing * others),
                where="look at the smoothed target: what share does each class get?"),
        Mistake("the target's part lacks its weight (1 - smoothing): the smoothed target is (1 - smoothing) * one_hot "
                "+ smoothing / C, so the loss is (1 - smoothing) * (-log p of the target) + smoothing * the mean of "
                "-log p over the classes",
                lambda: reduce(nll + smoothing * -log_probs.mean(dim=1)) if smoothing != 0 else _not_this_mistake(),
                where="look at the two weights, (1 - smoothing) and smoothing"),
        Mistake(f"F.one_hot(targets) without num_classes makes as many columns as the largest target + 1 (here "
                f"{int(targets.max()) + 1}), not one per class ({n_classes}): pass num_classes=logits.shape[1]",
                lambda: reduce(-(((1 - smoothing) * F.one_hot(targets).float() + smoothing / (int(targets.max()) + 1))
                                 * log_probs[:, :int(targets.max()) + 1]).sum(dim=1))
                if int(targets.max()) + 1 < n_classes else _not_this_mistake(),
                where="look at how many classes your smoothed target has"),
        Mistake("in your smoothed target the true class gets 1 - smoothing, without its own share smoothing / C: "
                "(1 - smoothing) * one_hot + smoothing / C gives it 1 - smoothing + smoothing / C. scatter_ (or an "
                "assignment) writes 1 - smoothing over the smoothing / C already there: add it instead, or write "
                "1 - smoothing + smoothing / C",
                lambda: reduce((1 - smoothing - smoothing / n_classes) * nll + smoothing * -log_probs.mean(dim=1))
                if smoothing != 0 else _not_this_mistake(),
                where="look at the value the true class gets in your smoothed target"),
        Mistake("the weights are swapped: the true class gets (1 - smoothing), the uniform part gets smoothing",
                lambda: reduce(smoothing * nll + (1 - smoothing) * (-log_probs.mean(dim=1))),
                where="look at the two weights, (1 - smoothing) and smoothing: which part gets which?"),
        Mistake("log_probs[:, targets] picks, for every row, the column of every target: an [N, N] matrix, not one "
                "value per sample. Pick each row's own target with gather(1, targets.unsqueeze(1)) or "
                "log_probs[torch.arange(N), targets]",
                lambda: reduce((1 - smoothing) * -log_probs[:, targets] + smoothing * -log_probs.mean(dim=1)),
                where="look at how each sample's log-probability of its own target is picked"),
        Mistake("gather(1, targets.unsqueeze(1)) keeps a column, shape [N, 1]; added to the uniform part, shape [N], "
                "it broadcasts to an [N, N] matrix (whose mean happens to be the right mean, but not its sum). "
                "squeeze(1) the gathered column to one value per sample, shape [N]",
                lambda: reduce((1 - smoothing) * nll.unsqueeze(1) + smoothing * -log_probs.mean(dim=1))
                if reduction != "mean" else _not_this_mistake(),
                where="look at the shape of each sample's picked log-probability and of the uniform part before "
                      "you add them"),
        Mistake("the uniform part is the mean of -log p over the C classes (each class gets smoothing / C); you "
                "summed it, which weights it C times",
                lambda: reduce((1 - smoothing) * nll + smoothing * -log_probs.sum(dim=1))
                if smoothing != 0 else _not_this_mistake(), where="look at how the uniform part reduces over the classes"),
        Mistake("the uniform part is one value per sample, the mean of that sample's -log p over its classes "
                "(dim=1); you averaged -log p over the whole batch, which gives every sample the same value (with "
                "reduction='mean' or 'sum' the two happen to agree, with 'none' they do not)",
                lambda: (1 - smoothing) * nll + smoothing * -log_probs.mean()
                if reduction == "none" and smoothing != 0 else _not_this_mistake(),
                where="look at which dims the uniform part's mean runs over"),
        Mistake("softmax must run over the classes (dim=1), not over the batch (dim=0)",
                lambda: reduce((1 - smoothing) * -F.log_softmax(logits, dim=0).gather(1, targets.unsqueeze(1)).squeeze(1)
                       + smoothing * -F.log_softmax(logits, dim=0).mean(dim=1)),
                where="look at the dim= of the softmax (or log_softmax)"),
        Mistake("reduction='mean' averages over the batch; you summed the per-sample losses",
                lambda: reduce((1 - smoothing) * nll + smoothing * -log_probs.mean(dim=1), "sum")
                if reduction == "mean" else _not_this_mistake(),
                where="look at the reduction at the end: mean or sum over the batch?"),
        Mistake(f"reduction='{reduction}' was ignored: you returned the mean over the batch",
                lambda: ref.label_smoothing_cross_entropy(logits, targets, smoothing, "mean")
                if reduction != "mean" else _not_this_mistake(),
                where="look at how the reduction argument is used at the end"),
        Mistake(f"reduction='{reduction}' was ignored: you returned the sum over the batch",
                lambda: ref.label_smoothing_cross_entropy(logits, targets, smoothing, "sum")
                if reduction != "sum" else _not_this_mistake(),
                where="look at how the reduction argument is used at the end"),
    ]


LossInput = tuple[torch.Tensor, torch.Tensor, float]


def _default_loss_inputs() -> list[LossInput]:
    return [
        (_randn(6, 4, seed=10), torch.tensor([0, 3, 1, 1, 2, 0]), 0.1),
        (_randn(5, 10, seed=11) * 100, torch.tensor([9, 0, 4, 4, 7]), 0.2),  # huge logits: softmax underflows
        (_randn(3, 5, seed=13), torch.tensor([0, 2, 1]), 0.1),  # no label is C - 1 = 4: one_hot needs num_classes
    ]


def _as_output(logits: torch.Tensor) -> torch.Tensor:
    """``logits`` as a model's output is: inside an autograd graph (not a leaf), so the loss must pass gradients on."""
    return logits.detach().clone().requires_grad_().clone()


def _expect_differentiable(got: Any, what: str) -> None:
    """A loss of logits that require grad requires grad too: backward() must reach the model through it."""
    expect(not isinstance(got, torch.Tensor) or got.requires_grad,
           f"{what}: the loss has the right values but does not require grad, though the logits do: backward() could "
           "not reach the model through it",
           where="look for torch.no_grad(), .detach(), .item() or a tensor rebuilt from values (torch.tensor(...)) "
                 "between the logits and the loss")


def _check_loss_calls(fn: Callable, cases: Sequence[tuple[torch.Tensor, torch.Tensor, float, str]]) -> None:
    for logits, targets, smoothing, reduction in cases:
        logits = _as_output(logits)
        try:
            got = call(fn, logits, targets, smoothing=smoothing, reduction=reduction)
        except CheckError as error:
            _explain_missing_class(error, logits, targets)
            raise
        what = (f"label_smoothing_cross_entropy(logits {list(logits.shape)}, targets {list(targets.shape)}, "
                f"smoothing={smoothing}, reduction='{reduction}')")
        expect_tensor(got, ref.label_smoothing_cross_entropy(logits, targets, smoothing, reduction), what=what,
                      mistakes=_smoothing_mistakes(logits.detach(), targets, smoothing, reduction))
        _expect_differentiable(got, what)


def _explain_missing_class(error: CheckError, logits: torch.Tensor, targets: torch.Tensor) -> None:
    """Name one_hot without num_classes when the crash is a size mismatch between C and max(label) + 1."""
    n_classes, seen = logits.shape[1], int(targets.max()) + 1
    cause = str(error.__cause__ or "")
    if seen < n_classes and f"({n_classes})" in cause and f"({seen})" in cause:
        raise CheckError(f"with labels {targets.tolist()} (none is the last class, {n_classes - 1}) your code made "
                         f"{seen} columns instead of {n_classes}",
                         where="look at where the one-hot targets are made: how does it know the number of classes?",
                         mistake="F.one_hot(targets) guesses the number of classes from the largest label. Pass "
                                 "num_classes=logits.shape[1]") from None


def check_label_smoothing_cross_entropy(fn: Callable, inputs: Sequence[LossInput] | None = None) -> None:
    """The loss with reduction='mean' matches the reference (and F.cross_entropy's label_smoothing)."""
    inputs = inputs if inputs is not None else _default_loss_inputs()
    _check_loss_calls(fn, [(logits, targets, smoothing, "mean") for logits, targets, smoothing in inputs])
    passed("label_smoothing_cross_entropy", len(inputs))


def check_label_smoothing_reductions(fn: Callable, inputs: Sequence[LossInput] | None = None) -> None:
    """reduction='sum' adds the per-sample losses, reduction='none' returns them, shape [N]."""
    # a batch of one too: reduction='none' returns shape [1] there, which a squeeze() without a dim would drop
    inputs = inputs if inputs is not None else [*_default_loss_inputs()[::2], (_randn(1, 4, seed=14), torch.tensor([2]), 0.1)]
    cases = [(logits, targets, smoothing, how) for logits, targets, smoothing in inputs for how in ("sum", "none")]
    _check_loss_calls(fn, cases)
    passed("label_smoothing_cross_entropy reductions", len(cases))


def _reused_loss(logits: torch.Tensor, targets: torch.Tensor) -> Callable:
    """The reference label_smoothing_cross_entropy, for a forward that reuses exercise 5's function; it names
    arguments given in the wrong order (targets first) instead of failing inside with an IndexError."""
    reference = ref.label_smoothing_cross_entropy  # bound now: the substitution may rename it in this very module

    def label_smoothing_cross_entropy(*args: Any, **kwargs: Any) -> torch.Tensor:
        first, second = (list(args) + [kwargs.get("logits"), kwargs.get("targets")])[:2] if len(args) < 2 \
            else args[:2]
        if isinstance(first, torch.Tensor) and isinstance(second, torch.Tensor) and not first.is_floating_point() \
                and second.is_floating_point() and first.shape == targets.shape and second.shape == logits.shape:
            raise CheckError("forward called label_smoothing_cross_entropy with the targets first and the logits "
                             "second; expected (logits, targets, ...)",
                             where="look at the order of the arguments in forward's call",
                             mistake="the function takes (logits, targets, smoothing, reduction): pass the logits "
                                     "first")
        return reference(*args, **kwargs)

    return label_smoothing_cross_entropy


def check_label_smoothing_loss(cls: Any, inputs: Sequence[tuple[float, str]] | None = None) -> None:
    """The nn.Module version: configured in __init__, called as loss_fn(logits, targets)."""
    inputs = inputs if inputs is not None else [(0.1, "mean"), (0.3, "sum")]
    logits, targets = _as_output(_randn(4, 3, seed=12)), torch.tensor([2, 0, 1, 2])
    # All instances first: settings kept on the class instead of on self show as instances that share them.
    losses = [_build(cls, "LabelSmoothingLoss", smoothing=smoothing, reduction=reduction)
              for smoothing, reduction in inputs]
    last = inputs[-1]
    for loss_fn, (smoothing, reduction) in zip(losses, inputs):
        # graded with the reference label_smoothing_cross_entropy, should forward call the learner's (exercise 5)
        ran: list[bool] = []
        handle = loss_fn.register_forward_hook(lambda *_: ran.append(True))
        with substitute(cls, label_smoothing_cross_entropy=_reused_loss(logits, targets)):
            try:
                got = call(loss_fn, logits, targets)
            except CheckError as error:
                cause = error.__cause__
                if isinstance(cause, TypeError) and "'weight' (position 3)" in str(cause):
                    raise CheckError(
                        f"LabelSmoothingLoss(smoothing={smoothing}, reduction='{reduction}')(logits, targets) raised "
                        f"TypeError: {cause}", where="look at the arguments forward passes to F.cross_entropy",
                        mistake="F.cross_entropy's third positional parameter is weight (one weight per class); "
                                "pass the smoothing by keyword, label_smoothing=self.smoothing") from cause
                if f"{smoothing} is not a valid value for reduction" in str(cause):
                    raise CheckError(
                        f"LabelSmoothingLoss(smoothing={smoothing}, reduction='{reduction}')(logits, targets) raised "
                        f"{type(cause).__name__}: {cause}",
                        where="look at where __init__ stores the two settings and where forward passes them on",
                        mistake=f"the smoothing ({smoothing}) reached the place of the reduction: the two settings "
                                "are swapped, when stored or when passed on") from cause
                n, c = logits.shape
                if cause is not None and f"({n})" in str(cause) and f"({c})" in str(cause):
                    raise CheckError(error.symptom, mistake=error.mistake, where=(
                        f"look at which dim each reduction in forward runs over: a result of {c} values (one per "
                        f"class) met one of {n} values (one per sample)")) from cause
                if error.where is None and cause is not None:
                    raise CheckError(error.symptom, mistake=error.mistake, where=(
                        f"look at the line of forward that raised (below) and the shapes it combines: logits "
                        f"{list(logits.shape)} (samples, classes), targets {list(targets.shape)}")) from cause
                raise
            finally:
                handle.remove()
        _expect_forward_ran(cls, bool(ran), f"LabelSmoothingLoss(smoothing={smoothing}, reduction='{reduction}')")
        shared = Mistake("your instances share their settings: each one computes with the settings of the last one "
                         f"created (smoothing={last[0]}, reduction='{last[1]}'). Store them on the instance, "
                         "self.smoothing = smoothing, not on the class",
                         lambda: ref.label_smoothing_cross_entropy(logits, targets, *last)
                         if (smoothing, reduction) != tuple(last) else _not_this_mistake(),
                         where="look at where __init__ stores smoothing and reduction: on self, or somewhere all instances "
                               "share?")
        expect_tensor(
            got, ref.label_smoothing_cross_entropy(logits, targets, smoothing, reduction),
            what=f"LabelSmoothingLoss(smoothing={smoothing}, reduction='{reduction}')(logits, targets)",
            mistakes=[
                shared,
                Mistake("forward ignores the smoothing given to __init__: store it (self.smoothing = smoothing) "
                        "and use it in forward",
                        lambda: ref.label_smoothing_cross_entropy(logits, targets, 0.1, reduction)
                        if smoothing != 0.1 else _not_this_mistake(),
                        where="look at what __init__ does with smoothing and what forward uses"),
                Mistake("forward ignores the reduction given to __init__: store it (self.reduction = reduction) "
                        "and pass it on (if forward calls your function from exercise 5, check that it handles "
                        "reduction too)",
                        lambda: ref.label_smoothing_cross_entropy(logits, targets, smoothing, "mean")
                        if reduction != "mean" else _not_this_mistake(),
                        where="look at what __init__ does with reduction and what forward passes on"),
                Mistake("forward ignores both settings given to __init__ and computes with the defaults "
                        "(smoothing=0.1, reduction='mean'): store them (self.smoothing = smoothing, self.reduction = "
                        "reduction) and pass both on in forward",
                        lambda: ref.label_smoothing_cross_entropy(logits, targets, 0.1, "mean")
                        if smoothing != 0.1 and reduction != "mean" else _not_this_mistake(),
                        where="look at the call in forward: which of self's settings it passes"),
                *_smoothing_mistakes(logits.detach(), targets, smoothing, reduction),
            ])
        _expect_differentiable(got, f"LabelSmoothingLoss(smoothing={smoothing}, reduction='{reduction}')(logits, "
                                    "targets)")
    # huge logits, as an untrained model can give: softmax underflows to 0 there, and log(0) is -inf
    big, big_targets = _as_output(_randn(5, 10, seed=11) * 100), torch.tensor([9, 0, 4, 4, 7])
    smoothing, reduction = inputs[0]
    with substitute(cls, label_smoothing_cross_entropy=_reused_loss(big, big_targets)):
        got = call(losses[0], big, big_targets)
    expect_tensor(got, ref.label_smoothing_cross_entropy(big, big_targets, smoothing, reduction),
                  what=f"LabelSmoothingLoss(smoothing={smoothing}, reduction='{reduction}')(logits of shape [5, 10] "
                       "with values in the hundreds, targets)",
                  mistakes=_smoothing_mistakes(big.detach(), big_targets, smoothing, reduction))
    for smoothing, reduction in inputs:
        _expect_positional_settings(cls, smoothing, reduction, logits, targets)
    passed("LabelSmoothingLoss", len(inputs))


def _expect_forward_ran(cls: Any, ran: bool, shown: str) -> None:
    """The task: the module's forward(logits, targets) returns the loss. Called as loss_fn(logits, targets),
    nn.Module.__call__ runs forward with the hooks around it: a forward hook on the instance must have fired."""
    if ran:
        return
    own_call = next((c for c in cls.__mro__ if c is not nn.Module and "__call__" in vars(c)), None) \
        if isinstance(cls, type) else None
    has_forward = getattr(cls, "forward", None) is not nn.Module.forward
    raise CheckError(
        f"{shown}(logits, targets) returned without running forward through nn.Module's __call__: a forward hook "
        "registered on the instance never ran" + ("" if has_forward else ", and the class has no forward method"),
        where="look at which method of your class computes the loss: forward, or __call__?",
        mistake=None if own_call is None else
        f"your class defines __call__ {'around' if has_forward else 'instead of'} forward: nn.Module's own __call__ is "
        "what runs forward, with the hooks around it, and overriding it skips them. Put the computation in "
        "forward(self, logits, targets) and do not define __call__")


def _expect_positional_settings(cls: Any, smoothing: float, reduction: str, logits: torch.Tensor,
                                targets: torch.Tensor) -> None:
    """The task's signature LabelSmoothingLoss(smoothing=0.1, reduction="mean") may be called positionally: an
    instance built as cls(smoothing, reduction) computes what the one built with keywords computed."""
    shown = f"LabelSmoothingLoss({smoothing}, '{reduction}')(logits, targets)"
    want = ref.label_smoothing_cross_entropy(logits, targets, smoothing, reduction)
    symptom, cause = None, None
    try:
        loss_fn = _build(cls, "LabelSmoothingLoss", smoothing, reduction)
        with substitute(cls, label_smoothing_cross_entropy=_reused_loss(logits, targets)):
            got = call(loss_fn, logits, targets)
        if not (isinstance(got, torch.Tensor) and got.shape == want.shape and same_value(got.detach(), want)):
            symptom = f"{shown} returned {describe(got)}; expected {describe(want)}"
    except CheckError as error:
        symptom, cause = f"{shown} (the settings given by position) failed: {error.symptom}", error
    if symptom is None:
        return
    params = list(inspect.signature(cls.__init__).parameters.values())[1:]
    order = [p.name for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)][:2]
    keyword_only = {p.name for p in params if p.kind == p.KEYWORD_ONLY} & {"smoothing", "reduction"}
    swapped = order == ["reduction", "smoothing"]
    raise CheckError(
        f"{symptom}, while LabelSmoothingLoss(smoothing={smoothing}, reduction='{reduction}') computed it right",
        where="look at __init__'s parameters: the task's signature LabelSmoothingLoss(smoothing=0.1, "
              "reduction=\"mean\") lets a caller give them by position, smoothing first",
        mistake=("your __init__ takes (reduction, smoothing): LabelSmoothingLoss(0.2) then sets the reduction to 0.2. "
                 "Keep the task's order, smoothing first" if swapped else
                 "your __init__ makes the settings keyword-only (after a *): the task's signature takes them by "
                 "position too" if keyword_only else None)) from cause


# --- exercise 7: nn.Sequential -------------------------------------------------------------------

def _conv_block_variant(net: ref.ConvBlockNet, x: torch.Tensor, order: str) -> torch.Tensor:
    """ConvBlockNet's output with its layers in another order, without touching the batch-norm statistics."""
    bn = net.bn

    def norm(t: torch.Tensor) -> torch.Tensor:
        return F.batch_norm(t, bn.running_mean.clone(), bn.running_var.clone(), bn.weight, bn.bias,
                            training=net.training, momentum=0.0, eps=bn.eps)

    steps = {"conv": net.conv, "bn": norm, "relu": F.relu, "pool": net.pool}
    for step in order.split():
        x = steps[step](x)
    return net.fc(torch.flatten(x, 1))


_SETTINGS = {nn.Conv2d: ("in_channels", "out_channels", "kernel_size", "stride", "padding", "dilation", "groups"),
             nn.MaxPool2d: ("kernel_size", "stride", "padding", "dilation"),
             nn.BatchNorm2d: ("num_features", "eps", "momentum", "affine", "track_running_stats")}
# What a batch norm built with a setting off its default loses
_BN_SETTING_LOST = {
    "affine": "affine=False builds a batch norm without its learnable scale and shift (weight and bias)",
    "track_running_stats": "track_running_stats=False keeps no running statistics, so in eval mode it still "
                           "normalises with each batch's own",
    "momentum": "momentum sets how far each training batch moves the running statistics that eval mode "
                "normalises with, so another value changes the eval-mode output after training",
}


def _setting(layer: nn.Module, setting: str) -> Any:
    """A layer's constructor argument, ints as pairs, and a convolution's padding 'same'/'valid' as numbers."""
    value = getattr(layer, setting)
    if setting == "padding" and value == "valid":
        return (0, 0)
    if setting == "padding" and value == "same":  # stride 1 (PyTorch requires it): (k - 1) * dilation / 2 a side
        value = tuple(d * (k - 1) // 2 for k, d in zip(layer.kernel_size, layer.dilation))
    return value if isinstance(value, tuple) or setting in ("in_channels", "out_channels", "groups") \
        else (value, value)


def _expect_same_settings(model: nn.Module, reference: nn.Module) -> None:
    """The Conv2d and MaxPool2d layers, in order, are built with the reference's arguments (the first that
    differs is named: a missing padding otherwise shows only later, as a Linear layer of another size)."""
    for kind, settings in _SETTINGS.items():
        mine = [m for m in model.modules() if type(m) is kind]
        theirs = [(n, m) for n, m in reference.named_modules() if type(m) is kind]
        for layer, (name, original) in zip(mine, theirs):
            for setting in settings:
                if _setting(layer, setting) == _setting(original, setting):
                    continue
                got, want = getattr(layer, setting), getattr(original, setting)
                raise CheckError(f"your nn.Sequential's {kind.__name__} has {setting}={got!r}; the original's "
                                 f"{name} has {setting}={want!r}",
                                 where=f"look at the arguments of your {kind.__name__} and of ConvBlockNet's "
                                       f"self.{name}",
                                 mistake=("without padding=1 a 3x3 convolution shrinks 28x28 maps to 26x26, so "
                                          "everything after it changes size: keep padding=1"
                                          if setting == "padding" and kind is nn.Conv2d
                                          and _setting(layer, setting) == (0, 0) else
                                          f"{_BN_SETTING_LOST[setting]}: leave it at its default ({want})"
                                          if kind is nn.BatchNorm2d and setting in _BN_SETTING_LOST else None))


def _copy_into(reference: nn.Module, model: nn.Sequential) -> None:
    """Copy the reference's parameters and buffers into ``model`` in order, naming any mismatch."""
    for layer in model.modules():
        if isinstance(layer, nn.Conv2d) and layer.bias is not None:
            raise CheckError(
                f"your Conv2d has a bias ({layer.bias.numel()} extra parameters), but the original uses bias=False",
                where="look at the arguments of your nn.Conv2d",
                mistake="the BatchNorm right after it subtracts the per-channel mean (removing any constant shift) and "
                        "adds its own learnable shift, so a conv bias before BatchNorm is wasted: pass bias=False")
    _expect_same_settings(model, reference)
    got, want = list(model.parameters()), list(reference.parameters())
    names = [n for n, _ in reference.named_parameters()]
    if not any(isinstance(m, nn.BatchNorm2d) for m in model.modules()):
        raise CheckError("your nn.Sequential has no nn.BatchNorm2d(8); the original normalises the conv's output",
                         where="look at the layers of ConvBlockNet.__init__ and compare them one by one with yours")
    for i, (name, w) in enumerate(zip(names, want)):
        if i >= len(got):
            raise CheckError(f"your nn.Sequential has only {len(got)} parameter tensors; the original has "
                             f"{len(want)} (the first one you lack: {name}, shape {list(w.shape)})",
                             where="look at the layers of ConvBlockNet.__init__ and compare them one by one with yours")
        if got[i].shape != w.shape:
            raise CheckError(f"parameter #{i} of your nn.Sequential has shape {list(got[i].shape)}, but the "
                             f"original's {name} has shape {list(w.shape)}",
                             where=f"look at the layer that holds {name}: its sizes and its place in the order",
                             mistake="keep the layers, their sizes and their order exactly as in ConvBlockNet")
    expect(len(got) == len(want), f"your nn.Sequential has {len(got)} parameter tensors; the original has {len(want)}",
           where="look at the layers of ConvBlockNet.__init__ and compare them one by one with yours")
    got_buffers, want_buffers = list(model.buffers()), list(reference.buffers())
    expect([b.shape for b in got_buffers] == [b.shape for b in want_buffers],
           "your nn.Sequential's buffers (BatchNorm statistics) differ from the original's: one nn.BatchNorm2d(8)",
           where="look at your normalisation layer: its kind and its number of channels")
    with torch.no_grad():
        for mine, theirs in zip(got + got_buffers, want + want_buffers):
            mine.copy_(theirs)


def _after_last_linear(reference: nn.Module, x: torch.Tensor, step: Callable[[torch.Tensor], torch.Tensor]) -> Any:
    with torch.no_grad():
        return step(reference(x))


def _linear_output_mistakes(model: nn.Module, reference: nn.Module, x: torch.Tensor) -> list[Mistake]:
    """When the learner's last Linear layer already gives the original's output, the difference comes after it."""
    try:
        with torch.no_grad():
            _, got = _trace(model, x.clone())
            _, want = _trace(reference, x.clone())
    except Exception:  # noqa: BLE001 - the comparison itself reports a model that cannot run
        return []
    linears = [n for n, m in _layers(model).items() if isinstance(m, nn.Linear) and n in got]
    if linears and "fc" in want and got[linears[-1]][1].shape == want["fc"][1].shape \
            and torch.allclose(got[linears[-1]][1], want["fc"][1], atol=1e-5, rtol=1e-4):
        return [Mistake(None, matches=lambda _: True,
                        where=f"your Linear layer ('{linears[-1]}') gives the original's output: look at what "
                              "comes after it")]
    return []


_CONV_BLOCK_ORDER = [nn.Conv2d, nn.BatchNorm2d, nn.ReLU, nn.MaxPool2d, nn.Flatten, nn.Linear]


def _expect_same_order(model: nn.Module) -> None:
    """The task: "the same layers, in the same order". The output cannot show every reordering (max-pooling and
    ReLU commute, a second ReLU changes nothing), so the kinds of the layers are compared, in the order they run
    (nn.Identity, which does nothing, is not counted)."""
    kinds = [type(m) for m in _layers(model).values() if not isinstance(m, nn.Identity)]
    if kinds == _CONV_BLOCK_ORDER:
        return
    shown = ", ".join(k.__name__ for k in kinds)
    want = ", ".join(k.__name__ for k in _CONV_BLOCK_ORDER)
    # a whole network inside the Sequential: a module with layers of its own and its own forward (not a container)
    whole = next(((n, m) for n, m in model.named_children() if any(True for _ in m.children())
                  and not isinstance(m, (nn.Sequential, nn.ModuleList, nn.ModuleDict))
                  and type(m).forward is not nn.Module.forward), None)
    if whole is not None:
        name, inner = whole
        network = type(inner).__name__
        raise CheckError(
            f"your nn.Sequential gives the original's output, but its layer '{name}' is a whole {network}, whose own "
            f"forward runs inside it; expected ConvBlockNet's layers themselves, in the order {want}",
            where="look at what you pass to nn.Sequential(...): one module, or the layers one by one?",
            mistake=f"nn.Sequential({network}()) wraps the network, it does not take it apart: its layers "
                    f"({', '.join(type(m).__name__ for m in inner.children())}) run through {network}.forward, which "
                    "applies F.relu and torch.flatten as function calls. List the layers themselves, with nn.ReLU() "
                    "and nn.Flatten() where that forward calls F.relu and torch.flatten")
    mistake = None
    if sorted(kinds, key=str) == sorted(_CONV_BLOCK_ORDER, key=str):
        moved = [k.__name__ for k, w in zip(kinds, _CONV_BLOCK_ORDER) if k is not w]
        mistake = (f"{' and '.join(moved)} are swapped" if len(moved) == 2 else f"{', '.join(moved)} are out of order")
        if set(moved) == {"ReLU", "MaxPool2d"}:
            mistake += (": max-pooling and ReLU commute, so the output is the same, but the task asks for "
                        "ConvBlockNet's order, which applies F.relu before self.pool")
    else:
        extra = [k.__name__ for k in dict.fromkeys(kinds) if kinds.count(k) > _CONV_BLOCK_ORDER.count(k)]
        if extra:
            mistake = (f"your nn.Sequential has more {', '.join(extra)} layers than ConvBlockNet: "
                       "keep exactly its layers")
    raise CheckError(f"your nn.Sequential gives the original's output, but its layers run in the order {shown}; "
                     f"ConvBlockNet's forward applies {want}",
                     where="look at the order of the layers in your nn.Sequential, compared with ConvBlockNet.forward "
                           "(the task asks for the same layers, in the same order)",
                     mistake=mistake)


def _expect_same_kinds(model: nn.Module) -> None:
    """When the output is wrong: a layer of another kind where ConvBlockNet has one (nn.AvgPool2d for its
    nn.MaxPool2d) is named, rather than only the values it changed."""
    layers = [(name, type(m)) for name, m in _layers(model).items() if not isinstance(m, nn.Identity)]
    # what comes after the last Linear layer (a softmax, a sigmoid) has its own messages, from the output
    last_linear = max((i for i, (_, kind) in enumerate(layers) if kind is nn.Linear), default=len(layers))
    foreign = [(name, kind) for name, kind in layers[:last_linear] if kind not in _CONV_BLOCK_ORDER]
    if len(layers) > len(_CONV_BLOCK_ORDER) and foreign:
        name, kind = foreign[0]
        raise CheckError(f"your nn.Sequential has a layer ConvBlockNet does not have: '{name}', an nn.{kind.__name__}, "
                         "so the output differs from the original's",
                         where=f"look at layer '{name}' of your nn.Sequential, compared with ConvBlockNet's __init__ "
                               "and forward (the task asks for the same layers, in the same order)",
                         mistake="dropout zeroes random values in training mode, and ConvBlockNet has none: keep "
                                 "exactly its layers" if issubclass(kind, nn.modules.dropout._DropoutNd) else None)
    if len(layers) != len(_CONV_BLOCK_ORDER):
        return
    swapped = [(name, kind, want) for (name, kind), want in zip(layers, _CONV_BLOCK_ORDER) if kind is not want]
    if len(swapped) == 1:
        name, kind, want = swapped[0]
        raise CheckError(f"your nn.Sequential's layer '{name}' is an nn.{kind.__name__} where ConvBlockNet applies "
                         f"nn.{want.__name__}, so the output differs from the original's",
                         where=f"look at layer '{name}' of your nn.Sequential, compared with ConvBlockNet's __init__ "
                               "and forward (the task asks for the same layers, in the same order)")


def check_sequential_version(fn: Callable[[], nn.Sequential], inputs: Sequence[torch.Tensor] | None = None) -> None:
    """An nn.Sequential with ConvBlockNet's layers gives ConvBlockNet's output (train and eval mode) once the
    weights are copied over in order."""
    inputs = inputs if inputs is not None else [_randn(4, 1, 28, 28, seed=20), _randn(2, 1, 28, 28, seed=21) + 1]
    for x in inputs:
        with torch.random.fork_rng():
            # task: "Creating a layer draws its first weights from PyTorch's global random generator"
            model = call(fn, allow=Allow(global_rng=True))
        expect(isinstance(model, nn.Sequential),
               f"sequential_version() should return an nn.Sequential, but returned {describe(model)}",
               where="look at what sequential_version returns: one nn.Sequential(...) of the layers")
        reference = _seeded(ref.ConvBlockNet, 7)
        with torch.no_grad():  # non-trivial running statistics, so eval mode differs from train mode
            reference.bn.running_mean.copy_(_randn(8, seed=22) * 0.1)
            reference.bn.running_var.copy_(_randn(8, seed=23).abs() + 0.5)
            reference.bn.weight.copy_(_randn(8, seed=24).abs() + 0.5)
            reference.bn.bias.copy_(_randn(8, seed=25) * 0.1)
        _copy_into(reference, model)
        for mode in ("train", "eval"):
            reference.train(mode == "train")
            model.train(mode == "train")
            mistakes = [
                Mistake("the ReLU is missing: ConvBlockNet applies F.relu after the batch norm; add nn.ReLU()",
                        lambda: _conv_block_variant(reference, x, "conv bn pool"),
                        where="look at the list of layers in your nn.Sequential, compared with ConvBlockNet.forward"),
                Mistake("the ReLU comes before the batch norm; the original order is conv, batch norm, ReLU, pool",
                        lambda: _conv_block_variant(reference, x, "conv relu bn pool"),
                        where="look at the order of the layers in your nn.Sequential, compared with ConvBlockNet.forward"),
                Mistake("the pooling comes before the batch norm; the original order is conv, batch norm, ReLU, pool",
                        lambda: _conv_block_variant(reference, x, "conv pool bn relu"),
                        where="look at the order of the layers in your nn.Sequential, compared with ConvBlockNet.forward"),
                Mistake("the original returns the raw logits of its Linear layer: drop the softmax at the end "
                        "(CrossEntropyLoss applies log-softmax itself)",
                        lambda: _after_last_linear(reference, x, lambda t: F.softmax(t, dim=1)),
                        where="look at what comes after the Linear layer"),
                Mistake("the original returns the raw logits of its Linear layer: drop the log-softmax at the end",
                        lambda: _after_last_linear(reference, x, lambda t: F.log_softmax(t, dim=1)),
                        where="look at what comes after the Linear layer"),
                Mistake("the original returns the raw logits of its Linear layer: drop the ReLU at the end",
                        lambda: _after_last_linear(reference, x, F.relu),
                        where="look at what comes after the Linear layer"),
                *_linear_output_mistakes(model, reference, x),
            ]
            with torch.no_grad():
                want = reference(x)
                got, _ = _run(model, x.clone(), "your nn.Sequential")
            try:
                expect_tensor(got, want, what=f"your nn.Sequential in {mode} mode (x of shape {list(x.shape)})",
                              mistakes=mistakes)
            except CheckError:
                _expect_same_kinds(model)
                raise
        _expect_same_order(model)
    passed("sequential_version", len(inputs) * 2)


# --- exercise 8: predict -------------------------------------------------------------------------

def _dropout_mlp() -> nn.Module:
    """Blocks inside the model: its dropout and batch norm are grandchildren, which eval mode must reach too."""
    return nn.Sequential(nn.Flatten(), nn.Sequential(nn.Linear(28 * 28, 64), nn.BatchNorm1d(64), nn.ReLU()),
                         nn.Sequential(nn.Dropout(0.5), nn.Linear(64, 10)))


def _dropout_cnn() -> nn.Module:
    return nn.Sequential(nn.Conv2d(1, 8, 5, bias=False), nn.BatchNorm2d(8), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Dropout(0.25), nn.Flatten(), nn.Linear(8 * 12 * 12, 10))


def check_predict(fn: Callable[[nn.Module, torch.Tensor], torch.Tensor],
                  inputs: Sequence[tuple[ModelFactory, torch.Tensor]] | None = None) -> None:
    """predict runs model(x) in eval mode without autograd and returns the class index of each image."""
    inputs = inputs if inputs is not None else [(_dropout_mlp, _randn(8, 1, 28, 28, seed=30)),
                                                (ref.MnistNet, _randn(3, 1, 28, 28, seed=31)),
                                                (_dropout_cnn, _randn(1, 1, 28, 28, seed=32))]  # a batch of one
    for seed, (factory, images) in enumerate(inputs):
        model = _seeded(factory, 40 + seed)
        model.train()  # how a model usually arrives after training
        reference = copy.deepcopy(model)
        with torch.no_grad():
            reference.eval()
            logits = reference(images)
        want = logits.argmax(dim=1)
        n = images.shape[0]
        # a batch of one after a batch of several passed: what drops the batch dim only when it is 1 is a squeeze
        squeezed_only = n == 1 and any(other.shape[0] > 1 for _, other in inputs[:seed])
        seen: list[tuple[bool, bool]] = []
        modes_seen: list[dict[str, bool]] = []

        def record(module: nn.Module, args: Any, output: Any) -> None:  # returns None: the output is kept
            seen.append((any(sub.training for sub in module.modules()), torch.is_grad_enabled()))
            modes_seen.append({name: sub.training for name, sub in module.named_modules()})

        handle = model.register_forward_hook(record)
        what = f"predict({type(model).__name__}, images of shape {list(images.shape)})"
        rule_broken: CheckError | None = None
        try:
            with torch.random.fork_rng():
                torch.manual_seed(seed)
                # task: "a function that predicts or evaluates calls model.eval() and leaves the model in eval mode"
                got = call(fn, model, images, allow=Allow(modes=True))
        except CheckError as error:
            if not seen:  # the model never ran: the learner's own crash or a rule broken before it
                raise
            rule_broken = error  # explained below by what the hook saw, when it can be
        finally:
            handle.remove()
        expect(bool(seen), f"{what}: the model's forward hooks never ran, so the model was not called as model(x)",
               where="look at how predict runs the model",
               mistake="call model(images), not model.forward(images): nn.Module.__call__ runs the hooks around "
                       "forward; calling forward directly skips them")
        training, grad_enabled = any(t for t, _ in seen), any(g for _, g in seen)
        if training:
            still = sorted({name or "the model itself" for modes in modes_seen for name, on in modes.items() if on})
            by_hand = not any(modes[""] for modes in modes_seen)
            only_itself = still == ["the model itself"]
            # every module in eval mode once predict returned: the switch came, but after the forward pass
            eval_after = not any(sub.training for sub in model.modules())
            raise CheckError(
                f"{what}: while the model ran, these modules were in training mode: {still[:3]}; expected every "
                "module in eval mode (dropout active and batch norm using the batch's own statistics make the "
                "predictions random)" + (f" ({rule_broken.symptom})" if rule_broken is not None else ""),
                where="look at where predict calls model.eval(): before or after the forward pass?" if eval_after
                and not by_hand else "look at how predict switches the model to evaluation mode (section 8)",
                mistake=("setting model.training = False changes only the top-level flag; model.eval() sets it on "
                         "every submodule" if by_hand else
                         "the model was in eval mode when predict returned, but it ran in training mode: model.eval() "
                         "came after the forward pass, when dropout had already dropped values and batch norm had "
                         "used (and updated) the batch's statistics. Call model.eval() before model(images)"
                         if eval_after else
                         "every submodule was in eval mode but the model itself was not: switching its children "
                         "(model.children(), or the layers one by one) leaves the model's own flag on. Call "
                         "model.eval() on the model, which sets its own flag and every submodule's" if only_itself else
                         "you forgot model.eval() before predicting (a bare `model.eval`, without the parentheses, only "
                         "names the method and changes nothing)"))
        if rule_broken is not None:
            raise rule_broken
        back = [name or "the model itself" for name, sub in model.named_modules() if sub.training]
        if back:  # every module ran in eval mode (checked above): predict switched some back afterwards
            raise CheckError(f"{what}: the model ran in eval mode, but after predict returned these modules were in "
                             f"training mode again: {back[:3]}; expected the model left in eval mode",
                             where="look at what predict does after the forward pass",
                             mistake="the task says predict leaves the model in eval mode: do not switch it back "
                                     "with model.train() (a training loop calls model.train() itself when it "
                                     "trains again)")
        expect_mode(model, False, what, when="after predict returned,")
        expect(not grad_enabled, f"{what}: autograd was recording while the model ran (torch.is_grad_enabled() "
                                 "was True); expected no graph to be recorded",
               where="look at the context the forward pass runs in",
               mistake="run the forward pass inside `with torch.no_grad():` (or torch.inference_mode()): "
                       "otherwise autograd records a graph that prediction never uses, which costs memory and time")
        expect_tensor(got, want, what=what, mistakes=[
            Mistake("you returned the logits; return the index of the largest logit: logits.argmax(dim=1)",
                    lambda: logits,
                    where="look at the last step: from logits to one class index per image"),
            Mistake("you returned softmax probabilities; return the class index: logits.argmax(dim=1)",
                    lambda: F.softmax(logits, dim=1),
                    where="look at the last step: from logits to one class index per image"),
            Mistake("argmax must run over the classes (dim=1), one answer per image; dim=0 runs over the batch",
                    lambda: logits.argmax(dim=0),
                    where="look at the dim= of argmax"),
            Mistake("for a batch of one image the batch dimension disappeared: squeeze() without a dim drops every "
                    "dimension of size 1, the batch's included, so the logits became [C] and argmax gave one number "
                    "(shape []) instead of shape [1]. Take argmax(dim=1) of the logits as they are (or squeeze only "
                    "the dims you mean)",
                    lambda: logits.squeeze().argmax(dim=-1) if n == 1 else _not_this_mistake(),
                    where="look at what predict does to the logits before argmax: a squeeze()?"),
            Mistake("argmax without dim= indexes the flattened tensor; use logits.argmax(dim=1)",
                    lambda: logits.argmax() if not squeezed_only else _not_this_mistake(),
                    where="look at the arguments of argmax"),
            Mistake("the softmax ran over dim=0, across the batch: each class's column then sums to 1 over the "
                    "images, which changes which class is largest in a row. The largest logit of a row is the "
                    "prediction: argmax(dim=1) of the logits (a softmax over dim=1, the classes, keeps it)",
                    lambda: F.softmax(logits, dim=0).argmax(dim=1),
                    where="look at the dim= of the softmax before argmax"),
            Mistake("those are the largest logits themselves (max's values); the prediction is where they are, the "
                    "class index: argmax(dim=1), or max(dim=1).indices",
                    lambda: logits.max(dim=1).values, where="look at which of max's two results you return"),
        ])
    passed("predict", len(inputs))


# --- put it together: a model that meets a contract ----------------------------------------------

PARAMETER_BUDGET = 10_000
_BN_TYPES = (nn.modules.batchnorm._BatchNorm,)


def _forward(model: nn.Module, x: torch.Tensor, what: str) -> torch.Tensor:
    """``model(x)`` under a fixed seed (dropout draws the same masks every time), its crash explained."""
    with torch.random.fork_rng():
        torch.manual_seed(0)
        try:
            out, _ = _run(model, x, what)
        except CheckError as error:
            cause = str(error.__cause__ or "")
            if "Expected more than 1 value per channel when training" in cause:
                raise CheckError(f"{what} raised ValueError: {cause}",
                                 where="look at what the batch-norm layers see: how many values per channel a batch "
                                       "of one gives them",
                                 mistake="a batch norm that sees one value per channel (a BatchNorm1d after flatten, "
                                         "or a BatchNorm2d on 1x1 maps) cannot normalise a batch of one in training "
                                         "mode; normalise the convolutions' feature maps instead") from None
            raise
    return out


class _OpTrace(TorchFunctionMode):
    """Records, for every tensor a torch function returns while active, the function's name and its first tensor
    argument, so that the output of a forward can be traced back to the operation that produced its values."""

    def __init__(self) -> None:
        super().__init__()
        self.producer: dict[int, tuple[str, torch.Tensor | None]] = {}
        self._keep: list[torch.Tensor] = []  # keeps the recorded tensors alive, so that their ids stay unique

    def __torch_function__(self, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
        out = func(*args, **(kwargs or {}))
        source = next((a for a in args if isinstance(a, torch.Tensor)), None)
        for tensor in out if isinstance(out, (tuple, list)) else (out,):
            if isinstance(tensor, torch.Tensor):
                self.producer[id(tensor)] = (getattr(func, "__name__", str(func)), source)
                self._keep.append(tensor)
        return out

    def last_value_op(self, out: torch.Tensor) -> tuple[str | None, list[str]]:
        """The operation that last changed ``out``'s values (None when not recorded), and the shape or pooling
        operations after it, which keep a ReLU's or a softmax's output non-negative."""
        after: list[str] = []
        for _ in range(100):
            name, source = self.producer.get(id(out), (None, None))
            if name is None or name.rstrip("_") not in _KEEPS_SIGN or source is None:
                return name, after
            after.append(name)
            out = source
        return None, after


# shape, selection and pooling operations: after a ReLU (or softmax) their output is still >= 0
_KEEPS_SIGN = {"flatten", "view", "reshape", "squeeze", "unsqueeze", "contiguous", "clone", "permute", "transpose",
               "__getitem__", "float", "to", "dropout", "max_pool1d", "max_pool2d", "avg_pool1d", "avg_pool2d",
               "adaptive_max_pool1d", "adaptive_max_pool2d", "adaptive_avg_pool1d", "adaptive_avg_pool2d",
               "mean", "amax", "max"}
_NOT_LOGITS = {"relu": "a ReLU", "relu6": "a ReLU6", "softmax": "a softmax", "log_softmax": "a log-softmax",
               "sigmoid": "a sigmoid"}


def _expect_raw_logits(model: nn.Module, x: torch.Tensor, shown: str) -> None:
    """The eval-mode output is the last layer's raw output: named as a ReLU, softmax... only on evidence, the
    operation traced back from the output, or rows of probabilities, or outputs clipped at exactly 0."""
    with _OpTrace() as trace:
        out = _forward(model, x.clone(), shown)
    name, after = trace.last_value_op(out)
    final = _NOT_LOGITS.get((name or "").rstrip("_"))
    then = f", then only {', '.join(reversed(after))}" if after else ""
    expect(final is None,
           f"{shown}: the output's values come from {final}{then}; expected raw logits (the last layer's output)",
           where="look at what comes after the last Linear (or convolution) layer",
           mistake=f"the model ends in {final}; return the last layer's raw output (CrossEntropyLoss applies "
                   "log-softmax itself)")
    values = out.detach()
    rows = values.sum(dim=1)
    sums = [round(r, 4) for r in rows[:3].tolist()]
    expect(not (bool((values >= 0).all()) and torch.allclose(rows, torch.ones_like(rows), atol=1e-4)),
           f"{shown}: every row of the output is >= 0 and sums to 1 (row sums {sums}...): probabilities, not raw "
           "logits", where="look at what comes after the last layer",
           mistake="the model ends in a softmax; return the last layer's raw output")
    zeros = int((values == 0).sum())
    expect(not (bool((values >= 0).all()) and zeros * 4 >= values.numel()),
           f"{shown}: {zeros} of the {values.numel()} logits of a batch of 8 are exactly 0 and none is negative: "
           "the output is clipped at 0, not raw logits", where="look at what comes after the last layer",
           mistake="the model ends in a ReLU (or a clamp at 0); return the last layer's raw output")


def logits_shape_mistake(shape: Sequence[int], n: int, num_classes: int) -> str | None:
    """What a model's output of the wrong shape says about its end, when it says something: the scores still
    carry 1x1 maps ([n, classes, 1, 1]), or the batch was flattened away."""
    shape = list(shape)
    if len(shape) > 2 and shape[:2] == [n, num_classes] and all(size == 1 for size in shape[2:]):
        return (f"the scores still carry their {'x'.join(map(str, shape[2:]))} maps: flatten them to [N, "
                f"{num_classes}] at the end (nn.Flatten(), or torch.flatten(x, 1) in forward)")
    if shape == [n * num_classes]:
        if n == 1:
            return ("for a batch of one image the batch dimension disappeared: a squeeze() without a dim (anywhere "
                    "in forward) or a flatten from dimension 0 drops it; squeeze the dims you mean (squeeze(-1)) "
                    "or flatten from dimension 1 (torch.flatten(x, 1))")
        return "the batch dimension was flattened away too: flatten from dimension 1 (torch.flatten(x, 1))"
    return None


def _materialise(model: nn.Module, in_channels: int, seed: int) -> None:
    """Give lazy layers (nn.LazyLinear: no weights until the first forward) their weights, with one batch of zeros
    run in eval mode (no running statistics change), so that the model's parameters can be counted and compared.
    Every module's mode is left as it was; a model without lazy layers is not touched."""
    if not any(isinstance(p, nn.parameter.UninitializedParameter) for p in model.parameters()):
        return
    modes = {m: m.training for m in model.modules()}
    try:
        with torch.no_grad(), torch.random.fork_rng():
            torch.manual_seed(seed)
            model.eval()(torch.zeros(2, in_channels, 28, 28))
    except Exception:  # noqa: BLE001 - the forward checks below run it again and report what went wrong
        pass
    finally:
        for module, training in modes.items():
            module.training = training


def check_build_classifier(fn: Callable[[int, int], nn.Module], inputs: Sequence[tuple[int, int]] | None = None) -> None:
    """build_classifier(in_channels, num_classes): [N, in_channels, 28, 28] -> [N, num_classes] raw logits for every
    N >= 1 in both modes; at most PARAMETER_BUDGET parameters; batch norm's behaviour (the batch matters in training
    mode, not in eval mode); every parameter receives a gradient."""
    inputs = inputs if inputs is not None else [(1, 10), (3, 5)]
    for in_channels, num_classes in inputs:
        shown = f"build_classifier({in_channels}, {num_classes})"
        with torch.random.fork_rng():
            torch.manual_seed(in_channels * 100 + num_classes)
            # task: "Creating the layers draws from PyTorch's global random generator: that is expected": drawing,
            # not reseeding it (torch.manual_seed inside resets the caller's random stream)
            model = call(fn, in_channels, num_classes, allow=Allow(global_rng="draws"))
        expect(isinstance(model, nn.Module), f"{shown} returned {describe(model)}; expected an nn.Module",
               where="look at what build_classifier returns",
               mistake=f"a class is not a model: create one from it, {model.__name__}(in_channels, num_classes)"
               if isinstance(model, type) else None)
        _materialise(model, in_channels, seed=in_channels * 100 + num_classes)
        count = ref.count_parameters(model)
        expect(count <= PARAMETER_BUDGET,
               f"{shown} has {count:,} parameters; the budget is at most {PARAMETER_BUDGET:,}",
               where="look at which layer holds most of them (named_parameters and numel): usually the first "
                     "Linear, whose in_features is the flattened size; pooling shrinks it")
        x = _randn(8, in_channels, 28, 28, seed=num_classes)
        others = x.clone()
        others[1:] = _randn(7, in_channels, 28, 28, seed=num_classes + 1) * 2 + 1
        for training in (True, False):
            model.train(training)
            mode = "training" if training else "eval"
            for n in (8, 1):
                what = f"{shown}, in {mode} mode, on a batch of {n}"
                out = _forward(model, x[:n].clone(), what)
                expect(isinstance(out, torch.Tensor) and out.shape == (n, num_classes) and out.dtype == torch.float32,
                       f"{what}: the output is {describe(out)}; expected float32 logits of shape [{n}, {num_classes}]",
                       where="look at the last layer's out_features and at what forward returns",
                       mistake=logits_shape_mistake(out.shape, n, num_classes) if isinstance(out, torch.Tensor) else None)
        model.train()
        first, changed = _forward(model, x.clone(), shown)[0], _forward(model, others.clone(), shown)[0]
        has_bn = any(isinstance(m, _BN_TYPES) for m in model.modules())
        expect(not torch.allclose(first, changed, atol=1e-6),
               f"{shown}, in training mode: image 0's logits stayed {first[:3].tolist()}... when the other images of "
               "its batch changed; expected them to change (batch normalisation uses the batch's statistics)",
               where="look for a batch-normalisation layer in your model",
               mistake=None if has_bn else "the model has no batch-normalisation layer")
        model.eval()
        untracked = [n for n, m in model.named_modules() if isinstance(m, _BN_TYPES) and not m.track_running_stats]
        first, changed = _forward(model, x.clone(), shown), _forward(model, others.clone(), shown)
        again = _forward(model, x.clone(), shown)
        expect(torch.allclose(first[0], changed[0], atol=1e-5) and torch.allclose(first, again, atol=1e-6),
               f"{shown}, in eval mode: image 0's logits were {first[0][:3].tolist()}... and then "
               f"{(changed[0] if not torch.allclose(first[0], changed[0], atol=1e-5) else again[0])[:3].tolist()}... "
               "for the same image; expected the same logits whatever the rest of the batch and on every call",
               where="look at what your forward does differently in training and in eval mode (self.training)"
               if not untracked else f"look at how layer '{untracked[0]}' is built",
               mistake=None if not untracked else
               "a batch norm built with track_running_stats=False keeps no running statistics, so in eval mode it "
               "still normalises with the batch's own: leave track_running_stats at its default (True)")
        # the calls above draw the same random numbers (a fixed seed each): calls that draw others must agree too
        calls = differs_between_calls(model, x, eval_mode=True)
        expect(not calls,
               f"{shown}, in eval mode: two calls on the same images gave different logits; expected the same logits "
               "on every call",
               where="look for a dropout function in forward" if calls.dropout_on else
               "look for randomness in forward that eval mode does not switch off (torch.rand, torch.randn...)",
               mistake=FUNCTIONAL_DROPOUT_IN_EVAL if calls.dropout_on else None)
        _expect_raw_logits(model, x, shown)
        model.train()
        model.zero_grad(set_to_none=True)
        with torch.random.fork_rng():
            torch.manual_seed(0)
            F.cross_entropy(model(x.clone()), torch.arange(8) % num_classes).backward()
        for name, param in model.named_parameters():
            grad = param.grad
            if grad is None or float(grad.abs().max()) <= 1e-6:
                layer = name.rpartition(".")[0]
                before_bn = name.endswith("bias") and grad is not None
                raise CheckError(
                    f"{shown}: after a loss on a batch of 8 in training mode was backpropagated, parameter '{name}' "
                    f"has {'no gradient' if grad is None else 'a gradient of zeros'}; expected every parameter to "
                    "receive one (a parameter without a gradient is wasted)",
                    where=f"look at layer '{layer}' and what comes right after it",
                    mistake=("a bias right before batch norm is removed by its mean subtraction (section 9): build "
                             "that layer with bias=False" if before_bn else
                             "that layer never takes part in forward, or its output is detached"))
        model.zero_grad(set_to_none=True)
        _expect_new_model(fn, model, in_channels, num_classes, shown)
    passed("build_classifier", len(inputs))


def _expect_new_model(fn: Callable[[int, int], nn.Module], first: nn.Module, in_channels: int, num_classes: int,
                      shown: str) -> None:
    """The task: "returning a new, untrained model". ``first`` is trained (its parameters moved), then ``fn`` is
    called again with the same arguments: the second model must be another object, share no layer, parameter or
    buffer with the first, and not hold the first one's trained values."""
    with torch.no_grad():
        for param in first.parameters():
            param.add_(0.5)  # what training does, as far as this rule goes: the values move
    with torch.random.fork_rng():
        torch.manual_seed(in_channels * 100 + num_classes)
        # task: "Creating the layers draws from PyTorch's global random generator: that is expected" (drawing only)
        second = call(fn, in_channels, num_classes, allow=Allow(global_rng="draws"))
    if isinstance(second, nn.Module):
        _materialise(second, in_channels, seed=in_channels * 100 + num_classes)
    again = f"{shown} called twice"
    where = ("look at what build_classifier keeps between calls: a cache, a model or layers created outside the "
             "function")
    expect(second is not first, f"{again} returned the same model object both times; expected a new model on every "
                                "call", where=where,
           mistake="build_classifier hands out one stored model: whoever trains it trains every 'new' model. "
                   "Create the layers and the model inside the function, on every call")
    if not isinstance(second, nn.Module):
        raise CheckError(f"{again}: the second call returned {describe(second)}; expected an nn.Module",
                         where="look at what build_classifier returns")
    # parameters and buffers only: a parameter-free layer (an nn.ReLU made once) can be shared harmlessly
    ids = {id(t) for t in [*first.parameters(), *first.buffers()]}
    shared = [n for n, t in [*second.named_parameters(), *second.named_buffers()] if id(t) in ids]
    expect(not shared, f"{again}: the two models share the tensors {shared[:3]} (the same objects); expected a new "
                       "model with layers of its own", where=where,
           mistake="layers (or parameters) created once, outside build_classifier, are shared by every model it "
                   "returns: training one trains them all. Create them inside the function")
    trained = dict(first.named_parameters())
    kept = [n for n, p in second.named_parameters()
            if n in trained and p.shape == trained[n].shape and torch.equal(p.detach(), trained[n].detach())]
    expect(not kept, f"{again}, the first model trained in between: the second model starts with the first one's "
                     f"trained values in {kept[:3]}; expected a new, untrained model",
           where="look at where the second model's weights come from: a copy of a model built before?",
           mistake="build_classifier copies a model it handed out earlier: build (or copy) an untrained model "
                   "that no caller ever receives")
