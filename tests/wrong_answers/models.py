"""Lesson 04 Defining models: the reference passes, plausible wrong answers fail by name."""

import math
import torch
import torch.nn.functional as F
from torch import nn

from helpers.checks import models as checks
from helpers.reference import models as ref
from tests.wrong_answers import Accept, Reject

# --- LeNet ------------------------------------------------------------------------------------


class LeNetNoSuper(ref.LeNet):
    def __init__(self):
        self.conv1 = nn.Conv2d(1, 6, 5)  # the mistake: no super().__init__() first


class LeNetWrongChannels(ref.LeNet):
    def __init__(self):
        super().__init__()
        self.conv2 = nn.Conv2d(3, 16, 5)  # conv1 produces 6 channels, not 3


class LeNetFc1For28(ref.LeNet):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(16 * 4 * 4, 120)  # the size for 28x28 inputs, not 32x32


class LeNetRenamed(ref.LeNet):
    def __init__(self):
        nn.Module.__init__(self)
        self.c1, self.c2 = nn.Conv2d(1, 6, 5), nn.Conv2d(6, 16, 5)
        self.f1, self.f2, self.f3 = nn.Linear(400, 120), nn.Linear(120, 84), nn.Linear(84, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.c2(F.max_pool2d(F.relu(self.c1(x)), 2))), 2)
        return self.f3(F.relu(self.f2(F.relu(self.f1(x.flatten(1))))))


class LeNetFlattenAll(ref.LeNet):
    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        x = x.view(-1)  # the mistake: the batch dimension is flattened away too
        return self.fc3(F.relu(self.fc2(F.relu(self.fc1(x)))))


class LeNetNoFlatten(ref.LeNet):
    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        return self.fc3(F.relu(self.fc2(F.relu(self.fc1(x)))))


class LeNetCallsForward(ref.LeNet):
    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1.forward(x)), 2)  # the mistake: .forward skips the hooks
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        x = torch.flatten(x, 1)
        return self.fc3(F.relu(self.fc2(F.relu(self.fc1(x)))))


class LeNetSoftmax(ref.LeNet):
    def forward(self, x):
        return F.softmax(super().forward(x), dim=1)


class LeNetNoRelu(ref.LeNet):
    def forward(self, x):
        x = F.max_pool2d(self.conv1(x), 2)
        x = F.max_pool2d(self.conv2(x), 2)
        return self.fc3(self.fc2(self.fc1(torch.flatten(x, 1))))


class LeNetSkipsFc2(ref.LeNet):
    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        return self.fc3(F.relu(self.fc1(torch.flatten(x, 1)))[:, :84])


LENET_INSTANCE = ref.LeNet()  # the mistake: check.check_lenet_layers(LeNet()) instead of (LeNet)


# --- MnistNet ---------------------------------------------------------------------------------


class MnistNetNoSuper(nn.Module):
    def __init__(self):
        self.conv1 = nn.Conv2d(1, 20, 5)


class MnistNetWrongChannels(ref.MnistNet):
    def __init__(self):
        super().__init__()
        self.conv2 = nn.Conv2d(10, 50, 5)


class MnistNetFc1For32(ref.MnistNet):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(5 * 5 * 50, 500)


class MnistNetOneTooManyLayers(ref.MnistNet):
    def __init__(self):
        super().__init__()
        self.fc3 = nn.Linear(10, 10)


class MnistNetLogSoftmax(ref.MnistNet):
    def forward(self, x):
        return F.log_softmax(super().forward(x), dim=1)


class MnistNetAvgPool(ref.MnistNet):
    def forward(self, x):
        x = F.avg_pool2d(F.relu(self.conv1(x)), 2)
        x = F.avg_pool2d(F.relu(self.conv2(x)), 2)
        return self.fc2(F.relu(self.fc1(torch.flatten(x, 1))))


class MnistNetFlattenWithView(ref.MnistNet):
    """Correct: view(-1, 800) keeps the batch for every input the task names (issue 18)."""

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        x = x.view(-1, 800)
        return self.fc2(F.relu(self.fc1(x)))


class MnistNetReluOnLogits(ref.MnistNet):
    def forward(self, x):
        return F.relu(super().forward(x))


class MnistNetFcForward(ref.MnistNet):
    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        return self.fc2.forward(F.relu(self.fc1.forward(torch.flatten(x, 1))))


class MnistNetWithDropout(ref.MnistNet):
    def __init__(self):
        super().__init__()
        self.dropout = nn.Dropout(0.5)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        return self.fc2(self.dropout(F.relu(self.fc1(torch.flatten(x, 1)))))


class MnistNetNotWritten(nn.Module):
    def __init__(self):
        super().__init__()
        raise NotImplementedError()


# --- count_parameters -------------------------------------------------------------------------


def count_tensors(model, trainable_only=False):
    return len([p for p in model.parameters() if p.requires_grad or not trainable_only])


def count_state_dict(model, trainable_only=False):
    return sum(v.numel() for v in model.state_dict().values())


def count_ignoring_flag(model, trainable_only=False):
    return sum(p.numel() for p in model.parameters())


def count_weights_only(model, trainable_only=False):
    return sum(p.numel() for n, p in model.named_parameters() if "weight" in n and (p.requires_grad or not trainable_only))


def count_as_tensor(model, trainable_only=False):
    return torch.tensor(ref.count_parameters(model, trainable_only))


def count_printed(model, trainable_only=False):
    print(sum(p.numel() for p in model.parameters() if p.requires_grad or not trainable_only))  # returns None


def count_always_trainable(model, trainable_only=False):
    return sum(p.numel() for p in model.parameters() if p.requires_grad)


# --- init_weights -----------------------------------------------------------------------------


def init_seeded_for_reproducibility(m):
    # "the same weights every time": reseeding on each visit gives every layer of a shape the same draws
    torch.manual_seed(0)
    if isinstance(m, (nn.Conv2d, nn.Linear)):
        nn.init.kaiming_normal_(m.weight, nonlinearity="relu")
        if m.bias is not None:
            nn.init.zeros_(m.bias)


def init_ignoring_bias(m):
    if isinstance(m, (nn.Conv2d, nn.Linear)):
        nn.init.kaiming_normal_(m.weight, nonlinearity="relu")


def init_deprecated(m):
    if isinstance(m, (nn.Conv2d, nn.Linear)):
        nn.init.kaiming_normal(m.weight, nonlinearity="relu")  # the mistake: the deprecated spelling
        if m.bias is not None:
            nn.init.constant(m.bias, 0.0)


def init_bias_unguarded(m):
    if isinstance(m, (nn.Conv2d, nn.Linear)):
        nn.init.kaiming_normal_(m.weight, nonlinearity="relu")
        nn.init.zeros_(m.bias)


def init_conv_only(m):
    if isinstance(m, nn.Conv2d):
        nn.init.kaiming_normal_(m.weight, nonlinearity="relu")
        if m.bias is not None:
            nn.init.zeros_(m.bias)


def init_every_weight(m):
    for name, p in m.named_parameters(recurse=False):
        if name == "weight":
            nn.init.kaiming_normal_(p) if p.dim() > 1 else nn.init.normal_(p)
        else:
            nn.init.zeros_(p)


def init_xavier(m):
    if isinstance(m, (nn.Conv2d, nn.Linear)):
        nn.init.xavier_uniform_(m.weight)
        if m.bias is not None:
            nn.init.zeros_(m.bias)


def init_uniform_kaiming(m):
    if isinstance(m, (nn.Conv2d, nn.Linear)):
        nn.init.kaiming_uniform_(m.weight, nonlinearity="relu")
        if m.bias is not None:
            nn.init.zeros_(m.bias)


def init_loops_modules(m):
    for sub in m.modules():
        if isinstance(sub, (nn.Conv2d, nn.Linear)):
            nn.init.kaiming_normal_(sub.weight, nonlinearity="relu")
            if sub.bias is not None:
                nn.init.zeros_(sub.bias)


def init_bias_truthiness(m):
    if isinstance(m, (nn.Conv2d, nn.Linear)):
        nn.init.kaiming_normal_(m.weight, nonlinearity="relu")
        if m.bias:
            nn.init.zeros_(m.bias)


# --- label smoothing --------------------------------------------------------------------------


def smoothing_log_of_softmax(logits, targets, smoothing=0.1, reduction="mean"):
    log_probs = torch.log(F.softmax(logits, dim=1))
    loss = (1 - smoothing) * -log_probs.gather(1, targets[:, None])[:, 0] + smoothing * -log_probs.mean(dim=1)
    return {"mean": loss.mean, "sum": loss.sum, "none": lambda: loss}[reduction]()


def smoothing_ignored(logits, targets, smoothing=0.1, reduction="mean"):
    return F.cross_entropy(logits, targets, reduction=reduction)


def smoothing_over_other_classes(logits, targets, smoothing=0.1, reduction="mean"):
    c = logits.shape[1]
    soft = torch.full_like(logits, smoothing / (c - 1)).scatter(1, targets[:, None], 1 - smoothing)
    loss = -(soft * F.log_softmax(logits, dim=1)).sum(dim=1)
    return {"mean": loss.mean, "sum": loss.sum, "none": lambda: loss}[reduction]()


def smoothing_summed(logits, targets, smoothing=0.1, reduction="mean"):
    return ref.label_smoothing_cross_entropy(logits, targets, smoothing, "sum")


def smoothing_by_builtin(logits, targets, smoothing=0.1, reduction="mean"):
    return F.cross_entropy(logits, targets, label_smoothing=smoothing, reduction=reduction)


def smoothing_wrong_dim(logits, targets, smoothing=0.1, reduction="mean"):
    log_probs = F.log_softmax(logits, dim=0)
    loss = (1 - smoothing) * -log_probs.gather(1, targets[:, None])[:, 0] + smoothing * -log_probs.mean(dim=1)
    return loss.mean()


def smoothing_mean_always(logits, targets, smoothing=0.1, reduction="mean"):
    return ref.label_smoothing_cross_entropy(logits, targets, smoothing, "mean")


def smoothing_none_is_sum(logits, targets, smoothing=0.1, reduction="mean"):
    how = "sum" if reduction == "none" else reduction
    return ref.label_smoothing_cross_entropy(logits, targets, smoothing, how)


class LossNoSuper(nn.Module):
    def __init__(self, smoothing=0.1, reduction="mean"):
        self.smoothing, self.reduction = smoothing, reduction

    def forward(self, logits, targets):
        return ref.label_smoothing_cross_entropy(logits, targets, self.smoothing, self.reduction)


class LossIgnoresSmoothing(nn.Module):
    def __init__(self, smoothing=0.1, reduction="mean"):
        super().__init__()
        self.reduction = reduction

    def forward(self, logits, targets):
        return ref.label_smoothing_cross_entropy(logits, targets, 0.1, self.reduction)


class LossIgnoresReduction(nn.Module):
    def __init__(self, smoothing=0.1, reduction="mean"):
        super().__init__()
        self.smoothing = smoothing

    def forward(self, logits, targets):
        return ref.label_smoothing_cross_entropy(logits, targets, self.smoothing)


class LossPlainClass:
    def __init__(self, smoothing=0.1, reduction="mean"):
        self.smoothing, self.reduction = smoothing, reduction

    def __call__(self, logits, targets):
        return ref.label_smoothing_cross_entropy(logits, targets, self.smoothing, self.reduction)


# --- nn.Sequential ----------------------------------------------------------------------------


def sequential_with_conv_bias():
    return nn.Sequential(nn.Conv2d(1, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Flatten(), nn.Linear(8 * 14 * 14, 10))


def sequential_without_flatten():
    return nn.Sequential(nn.Conv2d(1, 8, 3, padding=1, bias=False), nn.BatchNorm2d(8), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Linear(8 * 14 * 14, 10))


def sequential_without_relu():
    return nn.Sequential(nn.Conv2d(1, 8, 3, padding=1, bias=False), nn.BatchNorm2d(8), nn.MaxPool2d(2),
                         nn.Flatten(), nn.Linear(8 * 14 * 14, 10))


def sequential_relu_first():
    return nn.Sequential(nn.Conv2d(1, 8, 3, padding=1, bias=False), nn.ReLU(), nn.BatchNorm2d(8), nn.MaxPool2d(2),
                         nn.Flatten(), nn.Linear(8 * 14 * 14, 10))


def sequential_no_padding():
    return nn.Sequential(nn.Conv2d(1, 8, 3, bias=False), nn.BatchNorm2d(8), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Flatten(), nn.Linear(8 * 14 * 14, 10))


def sequential_custom_module():
    return ref.ConvBlockNet()


def sequential_named_layers():
    from collections import OrderedDict
    return nn.Sequential(OrderedDict(conv=nn.Conv2d(1, 8, 3, padding=1, bias=False), bn=nn.BatchNorm2d(8),
                                     relu=nn.ReLU(), pool=nn.MaxPool2d(2), flatten=nn.Flatten(),
                                     fc=nn.Linear(8 * 14 * 14, 10)))



def sequential_avg_pool():
    return nn.Sequential(nn.Conv2d(1, 8, 3, padding=1, bias=False), nn.BatchNorm2d(8), nn.ReLU(), nn.AvgPool2d(2),
                         nn.Flatten(), nn.Linear(8 * 14 * 14, 10))


def sequential_leaky_relu():
    return nn.Sequential(nn.Conv2d(1, 8, 3, padding=1, bias=False), nn.BatchNorm2d(8), nn.LeakyReLU(0.1),
                         nn.MaxPool2d(2), nn.Flatten(), nn.Linear(8 * 14 * 14, 10))

# --- predict ----------------------------------------------------------------------------------


def predict_without_eval(model, images):
    with torch.no_grad():
        return model(images).argmax(dim=1)


def predict_calls_forward(model, images):
    model.eval()
    with torch.no_grad():
        return model.forward(images).argmax(dim=1)


def predict_with_grad(model, images):
    model.eval()
    return model(images).argmax(dim=1)


def predict_logits(model, images):
    model.eval()
    with torch.no_grad():
        return model(images)


def predict_wrong_dim(model, images):
    model.eval()
    with torch.inference_mode():
        return model(images).argmax(dim=0)


def predict_inference_mode(model, images):
    model.eval()
    with torch.inference_mode():
        return model(images).argmax(dim=1)


# ---------------------------------------------------------------- issue 12: whole classes of mistakes


def predict_flag_by_hand(model, images):
    model.training = False  # the mistake: only the top-level flag; Dropout and BatchNorm stay in training mode
    with torch.no_grad():
        return model(images).argmax(dim=1)


def predict_restores_training(model, images):
    was_training = model.training
    model.eval()
    with torch.no_grad():
        predictions = model(images).argmax(dim=1)
    model.train(was_training)  # against the lesson's rule: a function that predicts leaves the model in eval mode
    return predictions


def predict_keepdim(model, images):
    model.eval()
    with torch.no_grad():
        return model(images).argmax(dim=1, keepdim=True)


def smoothing_shifts_in_place(logits, targets, smoothing=0.1, reduction="mean"):
    logits -= logits.max(dim=1, keepdim=True).values  # "for stability", but in the caller's tensor
    return ref.label_smoothing_cross_entropy(logits, targets, smoothing, reduction)


def smoothing_one_hot_guess(logits, targets, smoothing=0.1, reduction="mean"):
    n_classes = logits.shape[1]
    target = (1 - smoothing) * F.one_hot(targets).float() + smoothing / n_classes
    loss = -(target * F.log_softmax(logits, dim=1)).sum(dim=1)
    return {"mean": loss.mean, "sum": loss.sum, "none": lambda: loss}[reduction]()


class LossSharedSettings(nn.Module):
    smoothing, reduction = 0.1, "mean"

    def __init__(self, smoothing=0.1, reduction="mean"):
        super().__init__()
        type(self).smoothing, type(self).reduction = smoothing, reduction  # on the class: shared by every instance

    def forward(self, logits, targets):
        return F.cross_entropy(logits, targets, label_smoothing=self.smoothing, reduction=self.reduction)


def label_smoothing_cross_entropy(logits, targets, smoothing=0.1, reduction="mean"):
    """A learner's exercise 5 that ignores reduction, in the namespace their LabelSmoothingLoss uses."""
    return ref.label_smoothing_cross_entropy(logits, targets, smoothing, "mean")


class LossOnLearnersFunction(nn.Module):
    """Right in itself; calls this namespace's (wrong) exercise-5 function. Graded with the reference one."""

    def __init__(self, smoothing=0.1, reduction="mean"):
        super().__init__()
        self.smoothing, self.reduction = smoothing, reduction

    def forward(self, logits, targets):
        return label_smoothing_cross_entropy(logits, targets, self.smoothing, self.reduction)


# --- correct answers written differently from the reference (issue 18) ------------------------


class LeNetWithView(nn.Module):
    """Correct: layers passed positionally, flatten with view(-1, 16 * 5 * 5), one line per step."""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 6, 5)
        self.conv2 = nn.Conv2d(6, 16, 5)
        self.fc1 = nn.Linear(400, 120)
        self.fc2 = nn.Linear(120, 84)
        self.fc3 = nn.Linear(84, 10)

    def forward(self, x):
        x = self.conv1(x)
        x = F.relu(x)
        x = F.max_pool2d(x, kernel_size=2, stride=2)
        x = F.max_pool2d(F.relu(self.conv2(x)), (2, 2))
        x = x.view(-1, 16 * 5 * 5)
        return self.fc3(F.relu(self.fc2(F.relu(self.fc1(x)))))


class LeNetLayerModules(nn.Module):
    """Correct: ReLU, pooling and flatten as parameter-free modules, reshape via nn.Flatten, an extra print."""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(in_channels=1, out_channels=6, kernel_size=(5, 5))
        self.pool = nn.MaxPool2d(2)
        self.conv2 = nn.Conv2d(in_channels=6, out_channels=16, kernel_size=(5, 5))
        self.flatten = nn.Flatten()
        self.relu = nn.ReLU()
        self.fc1 = nn.Linear(in_features=16 * 5 * 5, out_features=120)
        self.fc2 = nn.Linear(in_features=120, out_features=84)
        self.fc3 = nn.Linear(in_features=84, out_features=10)

    def forward(self, x):
        x = self.pool(self.relu(self.conv1(x)))
        x = self.pool(self.relu(self.conv2(x)))
        print("flattening", tuple(x.shape))
        x = self.flatten(x)
        x = self.relu(self.fc1(x))
        return self.fc3(self.relu(self.fc2(x)))


class LeNetReshape(ref.LeNet):
    """Correct: x.reshape(x.size(0), -1), and torch.relu / torch.max_pool2d."""

    def forward(self, x):
        for conv in (self.conv1, self.conv2):
            x = torch.max_pool2d(torch.relu(conv(x)), 2)
        x = x.reshape(x.size(0), -1)
        for fc in (self.fc1, self.fc2):
            x = torch.relu(fc(x))
        return self.fc3(x)


class MnistNetReshape(nn.Module):
    """Correct: reshape(len(x), -1) and F.relu after pooling (the two commute)."""

    def __init__(self):
        super().__init__()
        self.conv1, self.conv2 = nn.Conv2d(1, 20, 5), nn.Conv2d(20, 50, 5)
        self.fc1, self.fc2 = nn.Linear(800, 500), nn.Linear(500, 10)

    def forward(self, x):
        x = F.relu(F.max_pool2d(self.conv1(x), 2))
        x = F.relu(F.max_pool2d(self.conv2(x), 2))
        return self.fc2(F.relu(self.fc1(x.reshape(len(x), -1))))


class MnistNetFlattenModule(nn.Module):
    """Correct: nn.Flatten() and nn.MaxPool2d modules kept as attributes."""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 20, kernel_size=5)
        self.conv2 = nn.Conv2d(20, 50, kernel_size=5)
        self.pool = nn.MaxPool2d(kernel_size=2)
        self.flatten = nn.Flatten()
        self.fc1 = nn.Linear(4 * 4 * 50, 500)
        self.fc2 = nn.Linear(500, 10)

    def forward(self, x):
        x = self.pool(F.relu(self.conv1(x)))
        x = self.pool(F.relu(self.conv2(x)))
        return self.fc2(F.relu(self.fc1(self.flatten(x))))


def count_loop(model, trainable_only=False):
    total = 0
    for param in model.parameters():
        if trainable_only and not param.requires_grad:
            continue
        total += param.numel()
    return total


def count_named(model, trainable_only=False):
    params = [p for _, p in model.named_parameters() if p.requires_grad or not trainable_only]
    return int(sum(p.numel() for p in params))


def count_math_prod(model, trainable_only=False):
    import math
    print("counting", type(model).__name__)
    chosen = filter(lambda p: p.requires_grad, model.parameters()) if trainable_only else model.parameters()
    return sum(math.prod(p.shape) for p in chosen)


def init_type_tuple(module):
    if type(module) in (nn.Conv2d, nn.Linear):
        nn.init.kaiming_normal_(module.weight, mode="fan_in", nonlinearity="relu")
        if module.bias is not None:
            with torch.no_grad():
                module.bias.zero_()


def init_two_branches(module):
    if isinstance(module, nn.Conv2d):
        nn.init.kaiming_normal_(module.weight, nonlinearity="relu")
        if module.bias is not None:
            nn.init.zeros_(module.bias)
    elif isinstance(module, nn.Linear):
        nn.init.kaiming_normal_(module.weight, nonlinearity="relu")
        if module.bias is not None:
            nn.init.constant_(module.bias, 0.0)


def init_getattr(module):
    if not isinstance(module, (nn.Linear, nn.Conv2d)):
        return
    nn.init.kaiming_normal_(module.weight, a=0, nonlinearity="relu")
    if getattr(module, "bias", None) is not None:
        module.bias.data.fill_(0)


def smoothing_one_hot(logits, targets, smoothing=0.1, reduction="mean"):
    n_classes = logits.size(-1)
    target = F.one_hot(targets, num_classes=n_classes).to(logits.dtype) * (1 - smoothing) + smoothing / n_classes
    loss = torch.sum(-target * torch.log_softmax(logits, dim=-1), dim=-1)
    if reduction == "none":
        return loss
    return loss.sum() if reduction == "sum" else loss.mean()


def smoothing_loop(logits, targets, smoothing=0.1, reduction="mean"):
    losses = []
    for row, target in zip(logits, targets):
        log_p = row.log_softmax(dim=0)
        losses.append((1 - smoothing) * -log_p[target] - smoothing * log_p.mean())
    loss = torch.stack(losses)
    return {"mean": loss.mean(), "sum": loss.sum(), "none": loss}[reduction]


def smoothing_logsumexp(logits, targets, smoothing=0.1, reduction="mean"):
    log_p = logits - torch.logsumexp(logits, dim=1, keepdim=True)
    picked = log_p[torch.arange(len(targets)), targets]
    loss = -(1 - smoothing) * picked - smoothing * log_p.mean(dim=1)
    if reduction == "mean":
        return loss.mean()
    if reduction == "sum":
        return loss.sum()
    return loss


class LossWithModule(nn.Module):
    """Correct: keeps a configured nn.CrossEntropyLoss."""

    def __init__(self, smoothing=0.1, reduction="mean"):
        super().__init__()
        self.loss = nn.CrossEntropyLoss(label_smoothing=smoothing, reduction=reduction)

    def forward(self, logits, targets):
        return self.loss(logits, targets)


class LossOwnMath(nn.Module):
    """Correct: its own formula, settings under other names, keyword arguments."""

    def __init__(self, smoothing=0.1, reduction="mean"):
        super().__init__()
        self.eps, self.how = smoothing, reduction

    def forward(self, logits, targets):
        return smoothing_one_hot(logits, targets, smoothing=self.eps, reduction=self.how)


class LossWithoutGradient(nn.Module):
    """Wrong: the loss is computed under torch.no_grad(), so backward() cannot reach the model."""

    def __init__(self, smoothing=0.1, reduction="mean"):
        super().__init__()
        self.smoothing, self.reduction = smoothing, reduction

    def forward(self, logits, targets):
        with torch.no_grad():
            return F.cross_entropy(logits, targets, label_smoothing=self.smoothing, reduction=self.reduction)


class LossLogOfSoftmax(nn.Module):
    """Wrong: log(softmax(x)) is -inf where softmax underflows (huge logits)."""

    def __init__(self, smoothing=0.1, reduction="mean"):
        super().__init__()
        self.smoothing, self.reduction = smoothing, reduction

    def forward(self, logits, targets):
        log_probs = torch.log(torch.softmax(logits, dim=1))
        per_sample = -(1 - self.smoothing) * log_probs.gather(1, targets.unsqueeze(1)).squeeze(1) \
            - self.smoothing * log_probs.mean(dim=1)
        return per_sample.mean() if self.reduction == "mean" else per_sample.sum()


class LossShiftsInPlace(nn.Module):
    """Wrong: shifts the caller's logits in place "for stability"."""

    def __init__(self, smoothing=0.1, reduction="mean"):
        super().__init__()
        self.smoothing, self.reduction = smoothing, reduction

    def forward(self, logits, targets):
        logits -= logits.max(dim=1, keepdim=True).values
        return F.cross_entropy(logits, targets, label_smoothing=self.smoothing, reduction=self.reduction)


def smoothing_detached(logits, targets, smoothing=0.1, reduction="mean"):
    # Wrong: computed on detached logits, so the loss is cut off from the model
    return ref.label_smoothing_cross_entropy(logits.detach(), targets, smoothing, reduction)


def init_children_only(module):
    # Wrong: initialises the layers among the module's children, never the module itself (a bare layer is left as it was)
    for child in module.children():
        if isinstance(child, (nn.Conv2d, nn.Linear)):
            nn.init.kaiming_normal_(child.weight)
            if child.bias is not None:
                nn.init.zeros_(child.bias)


def init_any_matrix_weight(module):
    # Wrong: picks modules by having a weight of 2 or more dims, which an nn.Embedding has too
    weight = getattr(module, "weight", None)
    if isinstance(weight, torch.Tensor) and weight.dim() >= 2:
        nn.init.kaiming_normal_(weight)
        if getattr(module, "bias", None) is not None:
            nn.init.zeros_(module.bias)


def predict_children_eval(model, images):
    # Wrong: the model and its direct children only; layers nested deeper stay in training mode
    model.training = False
    for child in model.children():
        child.training = False
    with torch.no_grad():
        return model(images).argmax(dim=1)


class LossFunctional(nn.Module):
    """Correct: the settings as a dict, passed on to F.cross_entropy."""

    def __init__(self, smoothing: float = 0.1, reduction: str = "mean") -> None:
        super().__init__()
        self.options = {"label_smoothing": smoothing, "reduction": reduction}

    def forward(self, logits, targets):
        return F.cross_entropy(logits, targets, **self.options)


class LossKeywordOnly(nn.Module):
    """Wrong: keyword-only settings, so the task's LabelSmoothingLoss(0.2) raises a TypeError."""

    def __init__(self, *, smoothing: float = 0.1, reduction: str = "mean") -> None:
        super().__init__()
        self.smoothing, self.reduction = smoothing, reduction

    def forward(self, logits, targets):
        return F.cross_entropy(logits, targets, reduction=self.reduction, label_smoothing=self.smoothing)


class LossReductionFirst(nn.Module):
    """Wrong: __init__ lists the reduction first; by keyword it works, by position the settings swap."""

    def __init__(self, reduction: str = "mean", smoothing: float = 0.1) -> None:
        super().__init__()
        self.config = (smoothing, reduction)

    def forward(self, logits, targets):
        smoothing, reduction = self.config
        return F.cross_entropy(logits, targets, label_smoothing=smoothing, reduction=reduction)


def sequential_ordered_dict():
    from collections import OrderedDict
    return nn.Sequential(OrderedDict([
        ("conv", nn.Conv2d(1, 8, 3, padding=1, bias=False)), ("bn", nn.BatchNorm2d(8)),
        ("relu", nn.ReLU(inplace=True)), ("pool", nn.MaxPool2d(2, 2)),
        ("flatten", nn.Flatten(start_dim=1)), ("fc", nn.Linear(1568, 10)),
    ]))


def sequential_appended():
    model = nn.Sequential()
    for layer in (nn.Conv2d(1, 8, kernel_size=3, stride=1, padding="same", bias=False), nn.BatchNorm2d(8),
                  nn.ReLU(), nn.MaxPool2d(kernel_size=2), nn.Flatten(), nn.Linear(8 * 14 * 14, 10)):
        model.append(layer)
    return model


def sequential_from_list():
    layers = [nn.Conv2d(1, 8, (3, 3), padding=(1, 1), bias=False), nn.BatchNorm2d(num_features=8), nn.ReLU(),
              nn.MaxPool2d(2), nn.Flatten(1), nn.Linear(in_features=8 * 14 * 14, out_features=10)]
    return nn.Sequential(*layers)


def predict_max_indices(model, images):
    model.eval()
    with torch.no_grad():
        return model(images).max(dim=1).indices


@torch.no_grad()
def predict_decorated(model, images):
    model.eval()
    probabilities = F.softmax(model(images), dim=1)
    return torch.argmax(probabilities, dim=1)


def predict_torch_max(model, images):
    model.train(False)
    with torch.inference_mode():
        _, classes = torch.max(model(images), 1)
    return classes


ALTERNATIVES = [
    Accept(checks.check_lenet_layers, LeNetWithView),
    Accept(checks.check_lenet_layers, LeNetLayerModules),
    Accept(checks.check_lenet_layers, LeNetReshape),
    Accept(checks.check_lenet_forward, LeNetWithView),
    Accept(checks.check_lenet_forward, LeNetLayerModules),
    Accept(checks.check_lenet_forward, LeNetReshape),
    Accept(checks.check_mnist_net_layers, MnistNetFlattenWithView),
    Accept(checks.check_mnist_net_layers, MnistNetReshape),
    Accept(checks.check_mnist_net_layers, MnistNetFlattenModule),
    Accept(checks.check_mnist_net_forward, MnistNetFlattenWithView),
    Accept(checks.check_mnist_net_forward, MnistNetReshape),
    Accept(checks.check_mnist_net_forward, MnistNetFlattenModule),
    Accept(checks.check_count_parameters, count_loop),
    Accept(checks.check_count_parameters, count_named),
    Accept(checks.check_count_parameters, count_math_prod),
    Accept(checks.check_init_weights, init_type_tuple),
    Accept(checks.check_init_weights, init_two_branches),
    Accept(checks.check_init_weights, init_getattr),
    Accept(checks.check_label_smoothing_cross_entropy, smoothing_one_hot),
    Accept(checks.check_label_smoothing_cross_entropy, smoothing_loop),
    Accept(checks.check_label_smoothing_cross_entropy, smoothing_logsumexp),
    Accept(checks.check_label_smoothing_reductions, smoothing_one_hot),
    Accept(checks.check_label_smoothing_reductions, smoothing_loop),
    Accept(checks.check_label_smoothing_reductions, smoothing_logsumexp),
    Accept(checks.check_label_smoothing_loss, LossWithModule),
    Accept(checks.check_label_smoothing_loss, LossOwnMath),
    Accept(checks.check_label_smoothing_loss, LossFunctional),
    Reject(checks.check_label_smoothing_loss, LossKeywordOnly, "makes the settings keyword-only"),
    Reject(checks.check_label_smoothing_loss, LossWithoutGradient, "does not require grad, though the logits do"),
    Reject(checks.check_label_smoothing_loss, LossLogOfSoftmax, "with values in the hundreds"),
    Reject(checks.check_label_smoothing_loss, LossShiftsInPlace, "changed the tensor it was given as `logits`"),
    Reject(checks.check_label_smoothing_cross_entropy, smoothing_detached, "does not require grad, though the logits do"),
    Reject(checks.check_label_smoothing_reductions, smoothing_detached, "does not require grad, though the logits do"),
    Reject(checks.check_predict, predict_children_eval, "were in training mode"),
    Reject(checks.check_init_weights, init_children_only, "the Linear layer itself kept its default weights"),
    Reject(checks.check_init_weights, init_any_matrix_weight, "you changed 'weight' of an nn.Embedding"),
    Reject(checks.check_label_smoothing_loss, LossReductionFirst, "Keep the task's order, smoothing first"),
    Accept(checks.check_sequential_version, sequential_ordered_dict),
    Accept(checks.check_sequential_version, sequential_appended),
    Accept(checks.check_sequential_version, sequential_from_list),
    Accept(checks.check_predict, predict_max_indices),
    Accept(checks.check_predict, predict_decorated),
    Accept(checks.check_predict, predict_torch_max),
]

NEW_CASES = [
    Reject(checks.check_label_smoothing_loss, LossSharedSettings, "your instances share their settings"),
    Accept(checks.check_label_smoothing_loss, LossOnLearnersFunction),
    Reject(checks.check_predict, predict_flag_by_hand, "changes only the top-level flag"),
    Reject(checks.check_predict, predict_restores_training, "expected the model left in eval mode"),
    Reject(checks.check_predict, predict_keepdim, "extra dimension of size 1"),
    Reject(checks.check_label_smoothing_cross_entropy, smoothing_shifts_in_place, "changed the tensor it was given as `logits`"),
    Reject(checks.check_label_smoothing_cross_entropy, smoothing_one_hot_guess, "Pass num_classes"),
]

CASES = [
    Accept(checks.check_lenet_layers, ref.LeNet),
    Reject(checks.check_lenet_layers, LeNetNoSuper, "must call super().__init__()"),
    Reject(checks.check_lenet_layers, LeNetWrongChannels, "the channels do not match between layers: conv2 has in_channels=3"),
    Reject(checks.check_lenet_layers, LeNetFc1For28, "fc1 has in_features=256"),
    Reject(checks.check_lenet_layers, LeNetRenamed, "name the layers conv1, conv2, fc1, fc2, fc3"),
    Reject(checks.check_lenet_layers, LeNetFlattenAll, "flattened the batch dimension too"),
    Reject(checks.check_lenet_layers, LENET_INSTANCE, "pass the class itself, not an instance"),
    Accept(checks.check_lenet_forward, ref.LeNet),
    Reject(checks.check_lenet_forward, LeNetWrongChannels, "Conv2d's in_channels must equal the out_channels"),
    Reject(checks.check_lenet_forward, LeNetNoFlatten, "unflattened"),
    Reject(checks.check_lenet_forward, LeNetCallsForward, "call model(x), not model.forward(x)"),
    Reject(checks.check_lenet_forward, LeNetSoftmax, "drop the softmax"),
    Reject(checks.check_lenet_forward, LeNetNoRelu, "no ReLU between the layers"),
    Reject(checks.check_lenet_forward, LeNetSkipsFc2, "never ran through model(x)"),
    Accept(checks.check_mnist_net_layers, ref.MnistNet),
    Reject(checks.check_mnist_net_layers, MnistNetNoSuper, "must call super().__init__()"),
    Reject(checks.check_mnist_net_layers, MnistNetWrongChannels, "conv2 has in_channels=10, but its input"),
    Reject(checks.check_mnist_net_layers, MnistNetFc1For32, "fc1 has in_features=1250"),
    Reject(checks.check_mnist_net_layers, MnistNetOneTooManyLayers, "unexpected ['fc3.weight', 'fc3.bias']"),
    Reject(checks.check_mnist_net_layers, MnistNetNotWritten, "is not written yet"),
    Accept(checks.check_mnist_net_forward, ref.MnistNet),
    Reject(checks.check_mnist_net_forward, MnistNetLogSoftmax, "drop the log_softmax"),
    Reject(checks.check_mnist_net_forward, MnistNetAvgPool, "not average pooling"),
    Reject(checks.check_mnist_net_forward, MnistNetReluOnLogits, "no ReLU after the last layer"),
    Reject(checks.check_mnist_net_forward, MnistNetWithDropout, "a Dropout layer the task does not ask for"),
    Reject(checks.check_mnist_net_forward, MnistNetFcForward, "forward hooks did not run for ['fc1', 'fc2']"),
    Accept(checks.check_count_parameters, ref.count_parameters),
    Reject(checks.check_count_parameters, count_tensors, "counted parameter tensors"),
    Reject(checks.check_count_parameters, count_state_dict, "also holds buffers"),
    Reject(checks.check_count_parameters, count_ignoring_flag, "skip the parameters whose requires_grad is False"),
    Reject(checks.check_count_parameters, count_weights_only, "you skipped the biases"),
    Reject(checks.check_count_parameters, count_as_tensor, "return a plain Python int"),
    Reject(checks.check_count_parameters, count_always_trainable, "frozen ones included"),
    Reject(checks.check_count_parameters, count_printed, "returned None; expected an int"),
    Accept(checks.check_init_weights, ref.init_weights),
    Reject(checks.check_init_weights, init_ignoring_bias, "your init ignores the biases"),
    Reject(checks.check_init_weights, init_deprecated, "deprecated init function without the trailing underscore"),
    Reject(checks.check_init_weights, init_bias_unguarded, "if m.bias is not None"),
    Reject(checks.check_init_weights, init_conv_only, "the Linear layer '6' kept its default weights"),
    Reject(checks.check_init_weights, init_every_weight, "a BatchNorm starts with weight 1"),
    Reject(checks.check_init_weights, init_xavier, "Xavier"),
    Reject(checks.check_init_weights, init_seeded_for_reproducibility, "reset a global random generator"),
    Reject(checks.check_init_weights, init_uniform_kaiming, "kaiming_uniform_"),
    Reject(checks.check_init_weights, init_loops_modules, "do not loop over module.modules()"),
    Reject(checks.check_init_weights, init_bias_truthiness, "`if m.bias:`"),
    Accept(checks.check_label_smoothing_cross_entropy, ref.label_smoothing_cross_entropy),
    Accept(checks.check_label_smoothing_cross_entropy, smoothing_by_builtin),
    Reject(checks.check_label_smoothing_cross_entropy, smoothing_log_of_softmax, "Use F.log_softmax"),
    Reject(checks.check_label_smoothing_cross_entropy, smoothing_ignored, "you ignored smoothing"),
    Reject(checks.check_label_smoothing_cross_entropy, smoothing_over_other_classes, "the C - 1 wrong classes"),
    Reject(checks.check_label_smoothing_cross_entropy, smoothing_summed, "you summed the per-sample losses"),
    Reject(checks.check_label_smoothing_cross_entropy, smoothing_wrong_dim, "not over the batch (dim=0)"),
    Accept(checks.check_label_smoothing_reductions, ref.label_smoothing_cross_entropy),
    Accept(checks.check_label_smoothing_reductions, smoothing_by_builtin),
    Reject(checks.check_label_smoothing_reductions, smoothing_mean_always, "you returned the mean over the batch"),
    Reject(checks.check_label_smoothing_reductions, smoothing_none_is_sum, "reduction='none' was ignored: you returned the sum"),
    Accept(checks.check_label_smoothing_loss, ref.LabelSmoothingLoss),
    Reject(checks.check_label_smoothing_loss, LossNoSuper, "must call super().__init__()"),
    Reject(checks.check_label_smoothing_loss, LossIgnoresSmoothing, "ignores the smoothing given to __init__"),
    Reject(checks.check_label_smoothing_loss, LossIgnoresReduction, "ignores the reduction given to __init__"),
    Reject(checks.check_label_smoothing_loss, LossPlainClass, "expected an nn.Module"),
    Accept(checks.check_sequential_version, ref.sequential_version),
    Accept(checks.check_sequential_version, sequential_named_layers),
    Reject(checks.check_sequential_version, sequential_with_conv_bias, "bias=False"),
    Reject(checks.check_sequential_version, sequential_without_flatten, "nn.Flatten()"),
    Reject(checks.check_sequential_version, sequential_without_relu, "the ReLU is missing"),
    Reject(checks.check_sequential_version, sequential_relu_first, "the ReLU comes before the batch norm"),
    Reject(checks.check_sequential_version, sequential_no_padding,
           "without padding=1 a 3x3 convolution shrinks 28x28 maps to 26x26"),
    Reject(checks.check_sequential_version, sequential_custom_module, "should return an nn.Sequential"),
    Reject(checks.check_sequential_version, sequential_avg_pool,
           "layer '3' is an nn.AvgPool2d where ConvBlockNet applies nn.MaxPool2d"),
    Reject(checks.check_sequential_version, sequential_leaky_relu,
           "layer '2' is an nn.LeakyReLU where ConvBlockNet applies nn.ReLU"),
    Accept(checks.check_predict, ref.predict),
    Accept(checks.check_predict, predict_inference_mode),
    Reject(checks.check_predict, predict_without_eval, "you forgot model.eval()"),
    Reject(checks.check_predict, predict_calls_forward, "not model.forward(images)"),
    Reject(checks.check_predict, predict_with_grad, "torch.no_grad()"),
    Reject(checks.check_predict, predict_logits, "you returned the logits"),
    Reject(checks.check_predict, predict_wrong_dim, "argmax must run over the classes"),
] + NEW_CASES + ALTERNATIVES


# --- put it together: build_classifier -------------------------------------------------------


class GapClassifier(nn.Module):
    """Correct: a Module subclass, three conv blocks, global average pooling instead of a big Linear."""

    def __init__(self, in_channels, num_classes):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(in_channels, 16, 3, padding=1, bias=False), nn.BatchNorm2d(16), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(16, 32, 3, padding=1, bias=False), nn.BatchNorm2d(32), nn.ReLU(), nn.MaxPool2d(2),
        )
        self.head = nn.Linear(32, num_classes)

    def forward(self, x):
        return self.head(self.features(x).mean(dim=(2, 3)))


def classifier_gap(in_channels, num_classes):
    return GapClassifier(in_channels, num_classes)


def classifier_with_dropout(in_channels, num_classes):
    """Correct: dropout (random only in training mode), a stride-2 convolution instead of pooling."""
    return nn.Sequential(
        nn.Conv2d(in_channels, 6, 5, stride=2, bias=False), nn.BatchNorm2d(6), nn.ReLU(),
        nn.Conv2d(6, 12, 3, stride=2, bias=False), nn.BatchNorm2d(12), nn.ReLU(),
        nn.Flatten(), nn.Dropout(0.2), nn.Linear(12 * 5 * 5, num_classes),
    )


def classifier_relu_before_bn(in_channels, num_classes):
    """Correct: conv (with bias) -> ReLU -> batch norm: the ReLU in between keeps the bias useful."""
    print("building a classifier for", in_channels, "channels")
    return nn.Sequential(
        nn.Conv2d(in_channels, 8, 3), nn.ReLU(), nn.BatchNorm2d(8), nn.MaxPool2d(2),
        nn.Conv2d(8, 8, 3), nn.ReLU(), nn.BatchNorm2d(8), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(8 * 5 * 5, num_classes),
    )


def _blocks(in_channels, num_classes, *, bias=False, norm=True, head=()):
    norm1 = [nn.BatchNorm2d(8)] if norm else []
    norm2 = [nn.BatchNorm2d(16)] if norm else []
    return nn.Sequential(
        nn.Conv2d(in_channels, 8, 3, padding=1, bias=bias), *norm1, nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(8, 16, 3, padding=1, bias=bias), *norm2, nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(16 * 7 * 7, num_classes), *head,
    )


def classifier_mnist_net(in_channels, num_classes):
    return nn.Sequential(nn.Conv2d(in_channels, 20, 5), nn.BatchNorm2d(20), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Conv2d(20, 50, 5), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
                         nn.Linear(800, 500), nn.ReLU(), nn.Linear(500, num_classes))


def classifier_no_norm(in_channels, num_classes):
    return _blocks(in_channels, num_classes, bias=True, norm=False)


def classifier_norm_after_flatten(in_channels, num_classes):
    return nn.Sequential(nn.Conv2d(in_channels, 8, 3, padding=1), nn.ReLU(), nn.MaxPool2d(4), nn.Flatten(),
                         nn.BatchNorm1d(8 * 7 * 7), nn.Linear(8 * 7 * 7, num_classes))


def classifier_bias_before_norm(in_channels, num_classes):
    return _blocks(in_channels, num_classes, bias=True)


def classifier_final_relu(in_channels, num_classes):
    return _blocks(in_channels, num_classes, head=(nn.ReLU(),))


def classifier_softmax(in_channels, num_classes):
    return _blocks(in_channels, num_classes, head=(nn.Softmax(dim=1),))


def classifier_ten_classes(in_channels, num_classes):
    return _blocks(in_channels, 10)


def classifier_one_channel(in_channels, num_classes):
    return _blocks(1, num_classes)


def classifier_untracked_norm(in_channels, num_classes):
    model = ref.build_classifier(in_channels, num_classes)
    return nn.Sequential(*[nn.BatchNorm2d(m.num_features, track_running_stats=False) if isinstance(m, nn.BatchNorm2d)
                           else m for m in model])


def classifier_returns_class(in_channels, num_classes):
    return GapClassifier  # the class, not a model built from it


def classifier_double(in_channels, num_classes):
    return ref.build_classifier(in_channels, num_classes).double()


class MaxPooledHead(nn.Module):
    """Correct: fully convolutional, a 1x1 convolution scores every position, the largest score per class wins
    (its logits of an untrained model are mostly positive, but they are raw scores, not clipped)."""

    def __init__(self, in_channels, num_classes):
        super().__init__()
        self.body = nn.Sequential(nn.Conv2d(in_channels, 10, 5, stride=2, bias=False), nn.BatchNorm2d(10), nn.ReLU(),
                                  nn.Conv2d(10, 16, 3, bias=False), nn.BatchNorm2d(16), nn.ReLU())
        self.score = nn.Conv2d(16, num_classes, 1)

    def forward(self, x):
        return torch.amax(self.score(self.body(x)), dim=(2, 3))


def classifier_relu_then_pool(in_channels, num_classes):
    """Wrong: the 1x1 scores go through a ReLU before the global pooling: every logit is clipped at 0."""
    return nn.Sequential(nn.Conv2d(in_channels, 8, 3, stride=2, bias=False), nn.BatchNorm2d(8), nn.ReLU(),
                         nn.Conv2d(8, num_classes, 1), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten())


class ManualSoftmaxHead(nn.Module):
    """Wrong: a softmax written by hand (exp, then divide by the row sums) after the last Linear layer."""

    def __init__(self, in_channels, num_classes):
        super().__init__()
        self.body = _blocks(in_channels, num_classes)

    def forward(self, x):
        scores = self.body(x).exp()
        return scores / scores.sum(dim=1, keepdim=True)


class UnusedLayer(nn.Module):
    def __init__(self, in_channels, num_classes):
        super().__init__()
        self.body = _blocks(in_channels, num_classes)
        self.extra = nn.Linear(num_classes, num_classes)  # built, never used

    def forward(self, x):
        return self.body(x)


class BatchStatsAlways(nn.Module):
    """Normalises with the batch's statistics in eval mode too."""

    def __init__(self, in_channels, num_classes):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, 8, 3, padding=1, bias=False)
        self.bn = nn.BatchNorm2d(8)
        self.fc = nn.Linear(8 * 7 * 7, num_classes)

    def forward(self, x):
        x = F.batch_norm(self.conv(x), None, None, self.bn.weight, self.bn.bias, training=True)
        return self.fc(torch.flatten(F.max_pool2d(F.relu(x), 4), 1))



def classifier_unflattened_head(in_channels, num_classes):
    """Wrong: a 1x1 convolution head after global pooling, never flattened: [N, classes, 1, 1]."""
    return nn.Sequential(nn.Conv2d(in_channels, 8, 3, bias=False), nn.BatchNorm2d(8), nn.ReLU(),
                         nn.AdaptiveAvgPool2d(1), nn.Conv2d(8, num_classes, 1))

CLASSIFIER_CASES = [
    Accept(checks.check_build_classifier, ref.build_classifier),
    Accept(checks.check_build_classifier, classifier_gap),
    Accept(checks.check_build_classifier, classifier_with_dropout),
    Accept(checks.check_build_classifier, classifier_relu_before_bn),
    Reject(checks.check_build_classifier, classifier_mnist_net, "the budget is at most 10,000"),
    Reject(checks.check_build_classifier, classifier_unflattened_head, "the scores still carry their 1x1 maps"),
    Reject(checks.check_build_classifier, classifier_no_norm, "the model has no batch-normalisation layer"),
    Reject(checks.check_build_classifier, classifier_norm_after_flatten, "cannot normalise a batch of one"),
    Reject(checks.check_build_classifier, classifier_bias_before_norm, "build that layer with bias=False"),
    Reject(checks.check_build_classifier, classifier_final_relu, "the model ends in a ReLU"),
    Reject(checks.check_build_classifier, classifier_softmax, "the model ends in a softmax"),
    Accept(checks.check_build_classifier, MaxPooledHead),
    Reject(checks.check_build_classifier, classifier_relu_then_pool, "the model ends in a ReLU"),
    Reject(checks.check_build_classifier, ManualSoftmaxHead, "sums to 1"),
    Reject(checks.check_build_classifier, classifier_ten_classes, "expected float32 logits of shape [8, 5]"),
    Reject(checks.check_build_classifier, classifier_one_channel, "its in_channels must be the images' number of channels"),
    Reject(checks.check_build_classifier, classifier_double, "Keep the model in float32"),
    Reject(checks.check_build_classifier, classifier_returns_class, "a class is not a model: create one from it, Gap"),
    Reject(checks.check_build_classifier, classifier_untracked_norm, "track_running_stats=False keeps no running"),
    Reject(checks.check_build_classifier, UnusedLayer, "never takes part in forward"),
    Reject(checks.check_build_classifier, BatchStatsAlways, "in eval mode: image 0's logits"),
]
CASES += CLASSIFIER_CASES


def smoothing_detached(logits, targets, smoothing=0.1, reduction="mean"):
    with torch.no_grad():
        loss = ref.label_smoothing_cross_entropy(logits, targets, smoothing, reduction)
    torch.set_grad_enabled(False)  # leaves autograd switched off for the caller
    return loss


CASES += [
    Reject(checks.check_label_smoothing_cross_entropy, smoothing_detached, "grad"),
]


# --- classes an independent learner found (issue 18) ----------------------------------------


class MnistNetLinearNoBias(ref.MnistNet):
    """Wrong: the fully connected layers built without a bias."""

    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(4 * 4 * 50, 500, bias=False)
        self.fc2 = nn.Linear(500, 10, bias=False)


class MnistNetChannelsLast(ref.MnistNet):
    """Wrong: the feature maps flattened in height, width, channel order."""

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        x = x.permute(0, 2, 3, 1).contiguous().view(len(x), -1)
        return self.fc2(F.relu(self.fc1(x)))


class LeNetNoReluAfterConv2(ref.LeNet):
    """Wrong: the second convolution's ReLU is missing."""

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(self.conv2(x), 2)
        x = torch.flatten(x, 1)
        return self.fc3(F.relu(self.fc2(F.relu(self.fc1(x)))))


class MnistNetFunctionalDropout(ref.MnistNet):
    """Wrong: functional dropout without training=self.training (random in eval mode too)."""

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        x = F.dropout(torch.flatten(x, 1), p=0.3)
        return self.fc2(F.relu(self.fc1(x)))


class LeNetReshapeBySize(ref.LeNet):
    """Correct: flattened with reshape(x.size(0), -1), ReLU modules kept as attributes (no parameters)."""

    def __init__(self):
        super().__init__()
        self.act = nn.ReLU()

    def forward(self, x):
        x = F.max_pool2d(self.act(self.conv1(x)), kernel_size=2, stride=2)
        x = F.max_pool2d(self.act(self.conv2(x)), kernel_size=2, stride=2)
        x = x.reshape(x.size(0), -1)
        return self.fc3(self.act(self.fc2(self.act(self.fc1(x)))))


def count_nested_twice(model, trainable_only=False):
    """Wrong: every named module asked for all its parameters, recursively."""
    return sum(p.numel() for _, module in model.named_modules() for p in module.parameters()
               if p.requires_grad or not trainable_only)


def count_frozen_when_trainable(model, trainable_only=False):
    """Wrong: with trainable_only=True it keeps exactly the frozen parameters."""
    return sum(p.numel() for p in model.parameters() if not (trainable_only and p.requires_grad))


def count_weights_and_biases(model, trainable_only=False):
    """Wrong: only the attributes called weight and bias."""
    total = 0
    for module in model.modules():
        for tensor in (getattr(module, "weight", None), getattr(module, "bias", None)):
            if isinstance(tensor, nn.Parameter) and (tensor.requires_grad or not trainable_only):
                total += tensor.numel()
    return total


def count_with_numpy(model, trainable_only=False):
    """Wrong: NumPy's sum returns a NumPy integer."""
    import numpy as np

    return np.sum([p.numel() for p in model.parameters() if p.requires_grad or not trainable_only])


def count_state_of_parameters(model, trainable_only=False):
    """Correct: named_parameters, a running total, requires_grad read once per parameter."""
    total = 0
    for _name, parameter in model.named_parameters():
        if trainable_only and not parameter.requires_grad:
            continue
        total += parameter.numel()
    return int(total)


def smoothing_index_select(logits, targets, smoothing=0.1, reduction="mean"):
    """Wrong: index_select over the classes gives every sample every target's column, [N, N]."""
    log_probs = F.log_softmax(logits, dim=1)
    loss = -(1 - smoothing) * log_probs.index_select(1, targets) - smoothing * log_probs.mean(dim=1)
    return loss.mean() if reduction == "mean" else loss.sum() if reduction == "sum" else loss


def smoothing_uniform_summed(logits, targets, smoothing=0.1, reduction="mean"):
    """Wrong: the uniform part sums -log p over the classes instead of averaging."""
    log_probs = logits.log_softmax(-1)
    nll = F.nll_loss(log_probs, targets, reduction="none")
    loss = (1 - smoothing) * nll - (smoothing * log_probs).sum(-1)
    return {"mean": loss.mean, "sum": loss.sum, "none": lambda: loss}[reduction]()


def smoothing_column_plus_row(logits, targets, smoothing=0.1, reduction="mean"):
    """Wrong: the picked log-probabilities stay a column [N, 1]; added to the [N] uniform part they make [N, N]
    (its mean is still the right mean, so only the other reductions show it)."""
    log_probs = torch.log_softmax(logits, dim=-1)
    picked = torch.take_along_dim(log_probs, targets[:, None], dim=-1)
    loss = -(1 - smoothing) * picked - smoothing * log_probs.mean(dim=-1)
    return loss.sum() if reduction == "sum" else loss.mean() if reduction == "mean" else loss


class LossTargetsFirst(nn.Module):
    """Wrong: calls exercise 5's function with (targets, logits)."""

    def __init__(self, smoothing=0.1, reduction="mean"):
        super().__init__()
        self.smoothing, self.reduction = smoothing, reduction

    def forward(self, logits, targets):
        return label_smoothing_cross_entropy(targets, logits, smoothing=self.smoothing, reduction=self.reduction)


class LossPositionalSmoothing(nn.Module):
    """Wrong: the smoothing passed as F.cross_entropy's third positional argument (weight)."""

    def __init__(self, smoothing=0.1, reduction="mean"):
        super().__init__()
        self.smoothing, self.reduction = smoothing, reduction

    def forward(self, logits, targets):
        return F.cross_entropy(logits, targets, self.smoothing, reduction=self.reduction)


def predict_max_values(model, images):
    """Wrong: the values of the maximum, not its position."""
    model.eval()
    with torch.inference_mode():
        values, _ = torch.max(model(images), dim=1)
    return values


CASES += [
    Reject(checks.check_mnist_net_layers, MnistNetLinearNoBias, "fc1, fc2 have no bias"),
    Reject(checks.check_mnist_net_forward, MnistNetChannelsLast, "channels-last"),
    Reject(checks.check_lenet_forward, LeNetNoReluAfterConv2, "the ReLU after conv2 is missing"),
    Reject(checks.check_mnist_net_forward, MnistNetFunctionalDropout, "even in eval mode"),
    Accept(checks.check_lenet_forward, LeNetReshapeBySize),
    Accept(checks.check_lenet_layers, LeNetReshapeBySize),
    Reject(checks.check_count_parameters, count_nested_twice, "counted nested parameters several times"),
    Reject(checks.check_count_parameters, count_frozen_when_trainable, "you counted the frozen parameters"),
    Reject(checks.check_count_parameters, count_weights_and_biases, "temperature"),
    Reject(checks.check_count_parameters, count_with_numpy, "NumPy's sum and prod"),
    Accept(checks.check_count_parameters, count_state_of_parameters),
    Reject(checks.check_label_smoothing_cross_entropy, smoothing_index_select, "an [N, N] matrix"),
    Reject(checks.check_label_smoothing_cross_entropy, smoothing_uniform_summed, "you summed it"),
    Reject(checks.check_label_smoothing_reductions, smoothing_column_plus_row, "it broadcasts to an [N, N] matrix"),
    Reject(checks.check_label_smoothing_loss, LossTargetsFirst, "with the targets first"),
    Reject(checks.check_label_smoothing_loss, LossPositionalSmoothing, "pass the smoothing by keyword"),
    Reject(checks.check_predict, predict_max_values, "max's values"),
]


def predict_squeezed(model, images):
    """Wrong: squeezes the logits, so a batch of one loses its batch dimension."""
    model.eval()
    with torch.no_grad():
        return model(images).squeeze().argmax(dim=-1)


CASES += [
    Reject(checks.check_predict, predict_squeezed, "should have shape [1]"),
]

# --- issue 18, round 3: classes the independent learner found -----------------------------------


def init_every_bias(m):
    """Wrong: zeroes the bias of every module that has one, BatchNorm's and LayerNorm's shift too."""
    if isinstance(m, (nn.Conv2d, nn.Linear)):
        nn.init.kaiming_normal_(m.weight, nonlinearity="relu")
    if hasattr(m, "bias") and m.bias is not None:
        nn.init.zeros_(m.bias)


def init_resets_the_rest(m):
    """Wrong: puts every other module back to its defaults (reset_parameters), not as it was."""
    if isinstance(m, (nn.Conv2d, nn.Linear)):
        nn.init.kaiming_normal_(m.weight, nonlinearity="relu")
        if m.bias is not None:
            nn.init.zeros_(m.bias)
    elif hasattr(m, "reset_parameters"):
        m.reset_parameters()


def init_resets_statistics(m):
    """Wrong: also clears the batch norms' running statistics."""
    if isinstance(m, (nn.Conv2d, nn.Linear)):
        nn.init.kaiming_normal_(m.weight, nonlinearity="relu")
        if m.bias is not None:
            nn.init.zeros_(m.bias)
    if isinstance(m, nn.modules.batchnorm._BatchNorm):
        m.reset_running_stats()


CASES += [
    Reject(checks.check_init_weights, init_every_bias, "you changed '1.bias' of an nn.BatchNorm2d"),
    Reject(checks.check_init_weights, init_resets_the_rest, "you changed '1.weight' of an nn.BatchNorm2d"),
    Reject(checks.check_init_weights, init_resets_statistics, "the buffer '1.running_mean' of a BatchNorm2d changed"),
]


class LossForwardDefaults(nn.Module):
    """Wrong: stores the settings, but forward calls exercise 5's function without them (its defaults)."""

    def __init__(self, smoothing=0.1, reduction="mean"):
        super().__init__()
        self.smoothing, self.reduction = smoothing, reduction

    def forward(self, logits, targets):
        return ref.label_smoothing_cross_entropy(logits, targets)


class LossSettingsPassedSwapped(nn.Module):
    """Wrong: forward passes each setting to the other's keyword."""

    def __init__(self, smoothing=0.1, reduction="mean"):
        super().__init__()
        self.smoothing = smoothing
        self.reduction = reduction

    def forward(self, logits, targets):
        return F.cross_entropy(logits, targets, reduction=self.smoothing, label_smoothing=self.reduction)


class LossUniformOverSamples(nn.Module):
    """Wrong: the uniform part averages the log-probabilities over the samples (dim 0), not the classes."""

    def __init__(self, smoothing=0.1, reduction="mean"):
        super().__init__()
        self.smoothing, self.reduction = smoothing, reduction

    def forward(self, logits, targets):
        log_p = logits.log_softmax(1)
        per_sample = (1 - self.smoothing) * -log_p[torch.arange(len(targets)), targets] \
            - self.smoothing * log_p.mean(0)
        return {"sum": per_sample.sum(), "none": per_sample}.get(self.reduction, per_sample.mean())


CASES += [
    Reject(checks.check_label_smoothing_loss, LossForwardDefaults, "forward ignores both settings"),
    Reject(checks.check_label_smoothing_loss, LossSettingsPassedSwapped, "the two settings are swapped"),
    Reject(checks.check_label_smoothing_loss, LossUniformOverSamples, "a result of 3 values (one per class)"),
]


class LeNetNoFirstPool(ref.LeNet):
    """Wrong: conv1's output is not pooled; view(-1, 400) then fails on the larger maps."""

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv2(F.relu(self.conv1(x)))), 2)
        x = x.view(-1, 16 * 5 * 5)
        return self.fc3(F.relu(self.fc2(F.relu(self.fc1(x)))))


class LeNetNoSecondPool(ref.LeNet):
    """Wrong: conv2's output is not pooled; view(-1, 400) hides it by making more rows than images."""

    def forward(self, x):
        x = F.relu(self.conv2(F.max_pool2d(F.relu(self.conv1(x)), 2)))
        x = x.view(-1, 400)
        return self.fc3(F.relu(self.fc2(F.relu(self.fc1(x)))))


class MnistNetWidthFirst(ref.MnistNet):
    """Wrong: flattens width before height (a transpose before the flatten): fc1 gets its inputs reordered."""

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv2(F.max_pool2d(F.relu(self.conv1(x)), 2))), 2)
        return self.fc2(F.relu(self.fc1(x.transpose(2, 3).flatten(1))))


class LeNetTanhOnLogits(ref.LeNet):
    """Wrong: squashes the logits with tanh."""

    def forward(self, x):
        return torch.tanh(super().forward(x))


def sequential_padding_two():
    """Wrong: padding=2 (the Linear resized to fit), not the original's padding=1."""
    return nn.Sequential(nn.Conv2d(1, 8, 3, padding=2, bias=False), nn.BatchNorm2d(8), nn.ReLU(),
                         nn.MaxPool2d(2), nn.Flatten(), nn.Linear(8 * 15 * 15, 10))


def sequential_pool_stride_one():
    """Wrong: the pool moves one pixel at a time (stride=1), so the Linear layer is resized to fit."""
    return nn.Sequential(nn.Conv2d(1, 8, 3, padding=1, bias=False), nn.BatchNorm2d(8), nn.ReLU(),
                         nn.MaxPool2d(2, stride=1), nn.Flatten(), nn.Linear(8 * 27 * 27, 10))


def sequential_log_softmax():
    """Wrong: log-probabilities instead of the raw logits."""
    return nn.Sequential(nn.Conv2d(1, 8, 3, padding=1, bias=False), nn.BatchNorm2d(8), nn.ReLU(),
                         nn.MaxPool2d(2), nn.Flatten(), nn.Linear(8 * 14 * 14, 10), nn.LogSoftmax(dim=1))


def sequential_sigmoid():
    """Wrong: a sigmoid after the Linear layer."""
    return nn.Sequential(nn.Conv2d(1, 8, 3, padding=1, bias=False), nn.BatchNorm2d(8), nn.ReLU(),
                         nn.MaxPool2d(2), nn.Flatten(), nn.Linear(8 * 14 * 14, 10), nn.Sigmoid())


def sequential_same_padding():
    """Correct: padding="same" is padding=1 for a 3x3 kernel; tuples for the sizes."""
    return nn.Sequential(nn.Conv2d(1, 8, (3, 3), padding="same", bias=False), nn.BatchNorm2d(8), nn.ReLU(),
                         nn.MaxPool2d(kernel_size=(2, 2), stride=2), nn.Flatten(), nn.Linear(8 * 14 * 14, 10))


CASES += [
    Reject(checks.check_lenet_forward, LeNetNoFirstPool, "between conv1 and conv2: conv2 received an input of shape"),
    Reject(checks.check_lenet_layers, LeNetNoFirstPool, "in the task's network it gets [4, 6, 14, 14]"),
    Reject(checks.check_lenet_forward, LeNetNoSecondPool, "fc1 received an input of shape [16, 400]"),
    Reject(checks.check_mnist_net_forward, MnistNetWidthFirst, "fc1 receives the right numbers in another order"),
    Reject(checks.check_lenet_forward, LeNetTanhOnLogits, "look at what forward does with fc3's output"),
    Reject(checks.check_sequential_version, sequential_padding_two, "has padding=(2, 2); the original's conv has"),
    Reject(checks.check_sequential_version, sequential_pool_stride_one, "MaxPool2d has stride=1"),
    Reject(checks.check_sequential_version, sequential_log_softmax, "drop the log-softmax at the end"),
    Reject(checks.check_sequential_version, sequential_sigmoid, "gives the original's output: look at what comes after"),
    Accept(checks.check_sequential_version, sequential_same_padding),
]


# --- round 5: rules the outputs cannot show ----------------------------------------------------


def sequential_relu_after_pool():
    """Wrong: conv and batch norm in one block, then the pool before the ReLU (they commute: same output)."""
    return nn.Sequential(nn.Sequential(nn.Conv2d(1, 8, 3, padding=1, bias=False), nn.BatchNorm2d(8)),
                         nn.MaxPool2d(2), nn.ReLU(inplace=True), nn.Flatten(), nn.Linear(8 * 14 * 14, 10))


def sequential_second_relu():
    """Wrong: an extra ReLU after the pool (a ReLU of non-negative values changes nothing: same output)."""
    return nn.Sequential(nn.Conv2d(1, 8, 3, padding=1, bias=False), nn.BatchNorm2d(8), nn.ReLU(), nn.MaxPool2d(2),
                         nn.ReLU(), nn.Flatten(), nn.Linear(8 * 14 * 14, 10))


def sequential_nested_blocks():
    """Correct: the feature part and the head as two nested Sequentials, in the original's order."""
    features = nn.Sequential(nn.Conv2d(1, 8, 3, padding=1, bias=False), nn.BatchNorm2d(8), nn.ReLU(), nn.MaxPool2d(2))
    return nn.Sequential(features, nn.Sequential(nn.Flatten(), nn.Linear(8 * 14 * 14, 10)))


_BUILT: dict = {}


def classifier_singleton(in_channels, num_classes):
    """Wrong: builds the model once per setting and hands out that same object on every later call."""
    key = f"{in_channels}x{num_classes}"
    if key not in _BUILT:
        _BUILT[key] = ref.build_classifier(in_channels, num_classes)
    return _BUILT[key]


_SHARED_HEADS: dict = {}


def classifier_shared_head(in_channels, num_classes):
    """Wrong: the Linear head is made once per number of classes and reused in every model."""
    head = _SHARED_HEADS.setdefault(num_classes, nn.Linear(16 * 7 * 7, num_classes))
    return nn.Sequential(*list(ref.build_classifier(in_channels, num_classes))[:-1], head)


_HANDED_OUT: dict = {}


def classifier_copies_last(in_channels, num_classes):
    """Wrong: a copy of the model it returned last time (by then trained by its caller)."""
    import copy

    last = _HANDED_OUT.get((in_channels, num_classes))
    model = copy.deepcopy(last) if last is not None else ref.build_classifier(in_channels, num_classes)
    _HANDED_OUT[(in_channels, num_classes)] = model
    return model


_TEMPLATES: dict = {}
_ACTIVATION = nn.ReLU()


def classifier_from_template(in_channels, num_classes):
    """Correct: a deep copy of an untrained template no caller ever receives; a parameter-free ReLU module shared."""
    import copy

    if (in_channels, num_classes) not in _TEMPLATES:
        _TEMPLATES[(in_channels, num_classes)] = nn.Sequential(
            nn.Conv2d(in_channels, 8, 3, padding=1, bias=False), nn.BatchNorm2d(8), _ACTIVATION, nn.MaxPool2d(2),
            nn.Conv2d(8, 16, 3, padding=1, bias=False), nn.BatchNorm2d(16), _ACTIVATION, nn.MaxPool2d(2),
            nn.Flatten(), nn.Linear(16 * 7 * 7, num_classes))
    return copy.deepcopy(_TEMPLATES[(in_channels, num_classes)])


def count_every_name(model, trainable_only=False):
    """Wrong: every name a parameter is held under, so a tied weight counts twice."""
    return sum(p.numel() for _, p in model.named_parameters(remove_duplicate=False)
               if p.requires_grad or not trainable_only)


def count_submodules_only(model, trainable_only=False):
    """Wrong: the own parameters of every submodule, but not those registered on the model itself."""
    return sum(p.numel() for name, module in model.named_modules() if name
               for p in module.parameters(recurse=False) if p.requires_grad or not trainable_only)


def count_children_own(model, trainable_only=False):
    """Wrong: only what each direct child registers itself (a Sequential child registers nothing)."""
    total = 0
    for child in model.children():
        total += sum(p.numel() for p in child.parameters(recurse=False) if p.requires_grad or not trainable_only)
    return total


def count_unique_ids(model, trainable_only=False):
    """Correct: every module's own parameters, each Parameter object counted once (by id)."""
    seen = {}
    for module in model.modules():
        for p in module.parameters(recurse=False):
            if p.requires_grad or not trainable_only:
                seen[id(p)] = p.numel()
    return sum(seen.values())


def smoothing_uniform_whole_batch(logits, targets, smoothing=0.1, reduction="mean"):
    """Wrong: the uniform part is one mean of -log p over every element of the batch."""
    log_p = torch.log_softmax(logits, dim=-1)
    picked = log_p[torch.arange(len(targets)), targets]
    per_sample = -(1 - smoothing) * picked - smoothing * log_p.mean(dim=(0, 1))
    return per_sample.sum() if reduction == "sum" else per_sample if reduction == "none" else per_sample.mean()


class MnistNetTanh(ref.MnistNet):
    """Wrong: tanh between the layers."""

    def forward(self, x):
        x = F.max_pool2d(torch.tanh(self.conv1(x)), 2)
        x = F.max_pool2d(torch.tanh(self.conv2(x)), 2)
        return self.fc2(torch.tanh(self.fc1(torch.flatten(x, 1))))


class LeNetStridedConv2(ref.LeNet):
    """Wrong: conv2 with stride 2 (14 -> 5, pooled to 2), fc1 resized to 16 * 2 * 2 to fit."""

    def __init__(self):
        super().__init__()
        self.conv2 = nn.Conv2d(6, 16, 5, stride=2)
        self.fc1 = nn.Linear(16 * 2 * 2, 120)


CASES += [
    Reject(checks.check_sequential_version, sequential_relu_after_pool, "MaxPool2d and ReLU are swapped"),
    Reject(checks.check_sequential_version, sequential_second_relu, "more ReLU layers than ConvBlockNet"),
    Accept(checks.check_sequential_version, sequential_nested_blocks),
    Reject(checks.check_build_classifier, classifier_singleton, "returned the same model object both times"),
    Reject(checks.check_build_classifier, classifier_shared_head, "share the tensors"),
    Reject(checks.check_build_classifier, classifier_copies_last, "the first one's trained values"),
    Accept(checks.check_build_classifier, classifier_from_template),
    Reject(checks.check_count_parameters, count_every_name, "tied weights: here embed.weight and out.weight"),
    Reject(checks.check_count_parameters, count_submodules_only, "temperature went uncounted"),
    Reject(checks.check_count_parameters, count_children_own, "not those nested deeper"),
    Accept(checks.check_count_parameters, count_unique_ids),
    Reject(checks.check_label_smoothing_reductions, smoothing_uniform_whole_batch,
           "you averaged -log p over the whole batch"),
    Reject(checks.check_mnist_net_forward, MnistNetTanh, "the activation between the layers is tanh"),
    Reject(checks.check_lenet_layers, LeNetStridedConv2, "conv2 is built with stride=(2, 2)"),
]


def init_new_bias(m):
    """Wrong: the right values, but the bias is a new Parameter (an optimizer built before keeps the old one)."""
    if isinstance(m, (nn.Conv2d, nn.Linear)):
        nn.init.kaiming_normal_(m.weight, nonlinearity="relu")
        if m.bias is not None:
            m.register_parameter("bias", nn.Parameter(torch.zeros(m.out_features if isinstance(m, nn.Linear)
                                                                 else m.out_channels)))


def init_new_weight(m):
    """Wrong: a new weight Parameter drawn with the right function."""
    if isinstance(m, (nn.Conv2d, nn.Linear)):
        m.weight = nn.Parameter(nn.init.kaiming_normal_(torch.empty_like(m.weight), nonlinearity="relu"))
        if m.bias is not None:
            nn.init.zeros_(m.bias)


def init_data_assignment(m):
    """Correct: .data assignments keep the Parameter objects (old style, but in place for the optimizer)."""
    if isinstance(m, (nn.Conv2d, nn.Linear)):
        m.weight.data = nn.init.kaiming_normal_(torch.empty_like(m.weight), nonlinearity="relu")
        if m.bias is not None:
            m.bias.data = torch.zeros_like(m.bias)


CASES += [
    Reject(checks.check_init_weights, init_new_bias, "is a new Parameter object after init_weights"),
    Reject(checks.check_init_weights, init_new_weight, "assigning module.weight = ..."),
    Accept(checks.check_init_weights, init_data_assignment),
]


# From a second learner tester who never read the checks (lesson 04, 123 answers).
class DropoutAlwaysOn(nn.Module):  # F.dropout drops values in eval mode too unless told training=self.training
    def __init__(self, in_channels, num_classes):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, 8, 3, padding=1, bias=False)
        self.bn = nn.BatchNorm2d(8)
        self.fc = nn.Linear(8, num_classes)

    def forward(self, x):
        x = F.relu(self.bn(self.conv(x))).mean(dim=(2, 3))
        return self.fc(F.dropout(x, 0.2))


class DropoutFollowsTheMode(DropoutAlwaysOn):
    def forward(self, x):
        x = F.relu(self.bn(self.conv(x))).mean(dim=(2, 3))
        return self.fc(F.dropout(x, 0.2, training=self.training))


def smoothing_keepdim_then_squeeze(logits, targets, smoothing=0.1, reduction="mean"):  # [] for a batch of one
    classes = logits.size(1)
    log_p = F.log_softmax(logits, dim=1)
    soft = torch.full_like(log_p, smoothing / classes)
    soft[torch.arange(len(targets)), targets] += 1 - smoothing
    loss = -(soft * log_p).sum(dim=1, keepdim=True).squeeze()
    return {"mean": loss.mean, "sum": loss.sum}.get(reduction, lambda: loss)()


def smoothing_without_its_weight(logits, targets, smoothing=0.1, reduction="mean"):
    log_p = F.log_softmax(logits, dim=1)
    loss = -log_p.gather(1, targets.unsqueeze(1)).squeeze(1) + smoothing * (-log_p.mean(dim=1))
    return {"mean": loss.mean, "sum": loss.sum}.get(reduction, lambda: loss)()


def smoothing_one_hot_of_the_targets_seen(logits, targets, smoothing=0.1, reduction="mean"):
    one_hot = F.one_hot(targets).float()
    classes = one_hot.size(1)
    soft = (1 - smoothing) * one_hot + smoothing / classes
    loss = -(soft * F.log_softmax(logits, dim=1)[:, :classes]).sum(dim=1)
    return {"mean": loss.mean, "sum": loss.sum}.get(reduction, lambda: loss)()


def count_parameters_flag_compared(model, trainable_only=False):  # keeps only frozen ones when the flag is False
    return sum(p.numel() for p in model.parameters() if p.requires_grad == trainable_only)


def sequential_without_affine():
    return nn.Sequential(nn.Conv2d(1, 8, 3, padding=1, bias=False), nn.BatchNorm2d(8, affine=False), nn.ReLU(),
                         nn.MaxPool2d(2), nn.Flatten(), nn.Linear(8 * 14 * 14, 10))


def sequential_without_running_stats():
    return nn.Sequential(nn.Conv2d(1, 8, 3, padding=1, bias=False), nn.BatchNorm2d(8, track_running_stats=False),
                         nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(), nn.Linear(8 * 14 * 14, 10))


def predict_names_eval_without_calling_it(model, images):
    model.eval  # noqa: B018 - the mistake: the method named, never called
    with torch.no_grad():
        return model(images).argmax(dim=1)


CASES += [
    Reject(checks.check_build_classifier, lambda c, n: DropoutAlwaysOn(c, n), "F.dropout(x, p) drops values in eval mode"),
    Accept(checks.check_build_classifier, lambda c, n: DropoutFollowsTheMode(c, n)),
    Reject(checks.check_label_smoothing_reductions, smoothing_keepdim_then_squeeze, "shape"),
    Reject(checks.check_label_smoothing_cross_entropy, smoothing_without_its_weight, "lacks its weight (1 - smoothing)"),
    Reject(checks.check_label_smoothing_cross_entropy, smoothing_one_hot_of_the_targets_seen, "without num_classes"),
    Reject(checks.check_count_parameters, count_parameters_flag_compared, "you counted none of the model's parameters"),
    Reject(checks.check_sequential_version, sequential_without_affine, "affine=False builds a batch norm without"),
    Reject(checks.check_sequential_version, sequential_without_running_stats, "track_running_stats=False keeps no"),
    Reject(checks.check_predict, predict_names_eval_without_calling_it, "without the parentheses"),
]


# From a third learner tester (lesson 04).
def count_trainable_by_grad(model, trainable_only=False):
    # "trainable" taken as having a gradient: None until a backward, so nothing counts
    return sum(p.numel() for p in model.parameters() if p.grad is not None or not trainable_only)


def init_every_convolution(m):
    # every kind of convolution, where the task names nn.Conv2d
    if isinstance(m, (nn.modules.conv._ConvNd, nn.Linear)):
        nn.init.kaiming_normal_(m.weight, nonlinearity="relu")
        if m.bias is not None:
            nn.init.zeros_(m.bias)


def init_weight_copy(m):
    # kaiming_normal_ on a copy: the layer keeps its own weight
    if isinstance(m, (nn.Conv2d, nn.Linear)):
        nn.init.kaiming_normal_(m.weight.data.clone(), nonlinearity="relu")
        if m.bias is not None:
            nn.init.zeros_(m.bias)


def predict_children_in_eval(model, images):
    for child in model.children():
        child.eval()
    with torch.no_grad():
        return model(images).argmax(dim=1)


def classifier_lazy_head(in_channels, num_classes):
    # the head's input size left to nn.LazyLinear: its weights exist after the first forward
    return nn.Sequential(nn.Conv2d(in_channels, 8, 3, padding=1, bias=False), nn.BatchNorm2d(8), nn.ReLU(),
                         nn.MaxPool2d(2), nn.Conv2d(8, 16, 3, padding=1, bias=False), nn.BatchNorm2d(16), nn.ReLU(),
                         nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.LazyLinear(num_classes))


CASES += [
    Reject(checks.check_count_parameters, count_trainable_by_grad, "p.grad is None until a backward"),
    Reject(checks.check_init_weights, init_every_convolution, "is another kind of convolution"),
    Reject(checks.check_init_weights, init_weight_copy, "though your nn.init calls ran"),
    Reject(checks.check_predict, predict_children_in_eval, "but the model itself was not"),
    Accept(checks.check_build_classifier, classifier_lazy_head),
]


def init_fan_in_channels_only(m):
    # Kaiming's std by hand, with a convolution's fan_in taken as its input channels only
    if isinstance(m, (nn.Conv2d, nn.Linear)):
        with torch.no_grad():
            m.weight.normal_(0.0, math.sqrt(2.0 / m.weight.shape[1]))
            if m.bias is not None:
                m.bias.zero_()


def sequential_bn_momentum():
    return nn.Sequential(nn.Conv2d(1, 8, 3, padding=1, bias=False), nn.BatchNorm2d(8, momentum=0.01), nn.ReLU(),
                         nn.MaxPool2d(2), nn.Flatten(), nn.Linear(8 * 14 * 14, 10))


def sequential_extra_dropout():
    return nn.Sequential(nn.Conv2d(1, 8, 3, padding=1, bias=False), nn.BatchNorm2d(8), nn.ReLU(),
                         nn.MaxPool2d(2), nn.Flatten(), nn.Dropout(0.2), nn.Linear(8 * 14 * 14, 10))


CASES += [
    Reject(checks.check_init_weights, init_fan_in_channels_only, "not m.weight.shape[1] alone"),
    Reject(checks.check_sequential_version, sequential_bn_momentum, "has momentum=0.01"),
    Reject(checks.check_sequential_version, sequential_extra_dropout, "a layer ConvBlockNet does not have: '5'"),
]


# --- the learner-tester's wrong answers (t04e) ---------------------------------------------------


def count_bytes_over_four(model, trainable_only=False):
    # bytes / 4 is the number of elements only for float32 parameters
    return sum(p.nbytes // 4 for p in model.parameters() if p.requires_grad or not trainable_only)


def count_reused_generator(model, trainable_only=False):
    params = model.parameters()
    total = sum(p.numel() for p in params)
    if trainable_only:
        return sum(p.numel() for p in params if p.requires_grad)  # the generator is used up: 0
    return total


def count_len_of_each(model, trainable_only=False):
    return sum(len(p) for p in model.parameters() if p.requires_grad or not trainable_only)


def count_with_a_list(model, trainable_only=False):
    """Correct: the parameters kept in a list, walked twice."""
    params = list(model.parameters())
    total = sum(p.numel() for p in params)
    return sum(p.numel() for p in params if p.requires_grad) if trainable_only else total


def init_replaces_data(m):
    # same Parameter objects, but new tensors swapped in through .data (made on the CPU in float32)
    if isinstance(m, (nn.Conv2d, nn.Linear)):
        m.weight.data = nn.init.kaiming_normal_(torch.empty(m.weight.shape), nonlinearity="relu")
        if m.bias is not None:
            m.bias.data = torch.zeros(m.bias.shape)


def init_copies_into_data(m):
    """Correct: new values copied into the parameters' own tensors."""
    if isinstance(m, (nn.Conv2d, nn.Linear)):
        new = nn.init.kaiming_normal_(torch.empty_like(m.weight), nonlinearity="relu")
        with torch.no_grad():
            m.weight.copy_(new)
            if m.bias is not None:
                m.bias.zero_()


def init_xavier_relu_gain(m):
    if isinstance(m, (nn.Conv2d, nn.Linear)):
        nn.init.xavier_normal_(m.weight, gain=nn.init.calculate_gain("relu"))
        if m.bias is not None:
            nn.init.zeros_(m.bias)


def smoothing_scatter_without_share(logits, targets, smoothing=0.1, reduction="mean"):
    log_p = F.log_softmax(logits, dim=1)
    dist = torch.full_like(log_p, smoothing / logits.shape[1])
    dist.scatter_(1, targets.unsqueeze(1), 1 - smoothing)  # the mistake: overwrites the true class's s / C
    loss = -(dist * log_p).sum(dim=1)
    return {"mean": loss.mean, "sum": loss.sum}.get(reduction, lambda: loss)()


class LabelSmoothingLossOwnCall(nn.Module):
    def __init__(self, smoothing=0.1, reduction="mean"):
        super().__init__()
        self.smoothing, self.reduction = smoothing, reduction

    def __call__(self, logits, targets):  # the mistake: __call__ instead of forward (hooks never run)
        return F.cross_entropy(logits, targets, label_smoothing=self.smoothing, reduction=self.reduction)


def predict_softmax_over_batch(model, images):
    model.eval()
    with torch.no_grad():
        return F.softmax(model(images), dim=0).argmax(dim=1)


def predict_eval_afterwards(model, images):
    with torch.no_grad():
        logits = model(images)
    model.eval()  # the mistake: too late, the model ran in training mode
    return logits.argmax(dim=1)


def predict_squeezed(model, images):
    model.eval()
    with torch.no_grad():
        return model(images).squeeze().argmax(dim=-1)


def sequential_wraps_network():
    return nn.Sequential(ref.ConvBlockNet())


def classifier_reseeds(in_channels, num_classes):
    torch.manual_seed(0)  # the mistake: resets the caller's random stream
    return nn.Sequential(nn.Conv2d(in_channels, 8, 3, padding=1, bias=False), nn.BatchNorm2d(8), nn.ReLU(),
                         nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(8, num_classes))


class LeNetFunctionalDropout(ref.LeNet):
    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        x = F.dropout(F.relu(self.fc1(torch.flatten(x, 1))), 0.5)  # training=True by default: random in eval too
        return self.fc3(F.relu(self.fc2(x)))


class LeNetSqueezedLogits(ref.LeNet):
    def forward(self, x):
        return super().forward(x).squeeze()  # [10] for a batch of one


CASES += [
    Reject(checks.check_count_parameters, count_bytes_over_four, "bytes / 4 counts the numbers only in a float32"),
    Reject(checks.check_count_parameters, count_reused_generator, "can be walked only once"),
    Reject(checks.check_count_parameters, count_len_of_each, "len(p) is the size of a tensor's first dimension"),
    Accept(checks.check_count_parameters, count_with_a_list),
    Reject(checks.check_init_weights, init_replaces_data, "but it now holds a new tensor of another dtype"),
    Accept(checks.check_init_weights, init_copies_into_data),
    Reject(checks.check_init_weights, init_xavier_relu_gain, "with ReLU's gain sqrt(2)"),
    Reject(checks.check_label_smoothing_cross_entropy, smoothing_scatter_without_share,
           "without its own share smoothing / C"),
    Reject(checks.check_label_smoothing_loss, LabelSmoothingLossOwnCall, "your class defines __call__ instead of forward"),
    Reject(checks.check_predict, predict_softmax_over_batch, "the softmax ran over dim=0, across the batch"),
    Reject(checks.check_predict, predict_eval_afterwards, "model.eval() came after the forward pass"),
    Reject(checks.check_predict, predict_squeezed, "squeeze() without a dim drops every dimension of size 1"),
    Reject(checks.check_sequential_version, sequential_wraps_network, "is a whole ConvBlockNet"),
    Reject(checks.check_build_classifier, classifier_reseeds, "reset a global random generator (torch.manual_seed(0))"),
    Reject(checks.check_lenet_forward, LeNetFunctionalDropout, "a dropout function that stays on in eval mode"),
    Reject(checks.check_lenet_layers, LeNetSqueezedLogits, "a squeeze() without a dim (anywhere in forward)"),
]


# One helper tells randomness in forward from a dropout left on: each is named only on its own evidence.
class LeNetNoisy(ref.LeNet):
    """Wrong: adds noise to its input in forward (a "regulariser" that eval mode does not switch off)."""

    def forward(self, x):
        return super().forward(x + 0.1 * torch.randn_like(x))


class NoiseAlwaysOn(DropoutAlwaysOn):
    """Wrong: noise on the pooled features in every mode."""

    def forward(self, x):
        x = F.relu(self.bn(self.conv(x))).mean(dim=(2, 3))
        return self.fc(x + 0.05 * torch.randn_like(x))


def classifier_noise_always_on(in_channels, num_classes):
    return NoiseAlwaysOn(in_channels, num_classes)


CASES += [
    Reject(checks.check_lenet_forward, LeNetNoisy, "(torch.rand, torch.randn...)"),
    Reject(checks.check_build_classifier, classifier_noise_always_on, "eval mode does not switch off (torch.rand"),
]
