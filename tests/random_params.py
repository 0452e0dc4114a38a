"""Parameters that distinguish: the one helper every parity, mapping and oracle test applies to a model first.

Freshly built models hide whole classes of bugs: LayerNorm/BatchNorm affines are 1 and 0, BatchNorm statistics
are 0 and 1, Linear biases are 0, and QT-ViT's alpha = beta = gamma = 1, so a swapped, dropped or mis-mapped
parameter changes nothing. :func:`randomise_parameters` redraws each of them from a seeded generator, at
magnitudes that keep a deep model's activations in a sane range, so that every such mistake moves the output.
Weights that are already random (Linear/Conv weights, embeddings, E1/E2, random features) are left as they are.
"""
import torch
import torch.nn as nn

#: QT-ViT alpha, beta, gamma ranges: disjoint (so swapping any two changes the kernel) and inside the positive-kernel
#: region d * alpha^2 * gamma^2 >= 4 * beta^4 for every head width d >= 1
#: (LiteMLA.qt_positivity_margin)
QT_RANGES = {"qt_alpha": (0.8, 1.4), "qt_beta": (0.3, 0.7), "qt_gamma": (1.5, 2.0)}
NORMS = (nn.LayerNorm, nn.BatchNorm1d, nn.BatchNorm2d, nn.GroupNorm)


def _uniform(tensor, low, high, generator):
    tensor.copy_(torch.rand(tensor.shape, generator=generator, dtype=torch.float64).mul(high - low).add(low))


def _normal(tensor, std, generator):
    tensor.copy_(torch.randn(tensor.shape, generator=generator, dtype=torch.float64).mul(std))


def randomise_parameters(model, seed=0, scales=False):
    """Redraw, in place and deterministically for ``seed``, every parameter or buffer a fresh model holds at a
    constant: norm weights U(0.6, 1.4) and biases N(0, 0.1^2), BatchNorm running means N(0, 0.1^2) and variances
    U(0.5, 1.5), Linear/Conv biases N(0, 0.05^2), QT alpha/beta/gamma from :data:`QT_RANGES`.

    ``scales=True`` also replaces every attention ``scale`` left at its default (None: 1/sqrt(d)) by a random value
    in [0.7, 1.3] / sqrt(d), so an exported ``scale`` attribute that is dropped or ignored shows up.
    Returns the model (eval mode).
    """
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for module in model.modules():
            if isinstance(module, NORMS):
                if getattr(module, "weight", None) is not None:
                    _uniform(module.weight, 0.6, 1.4, generator)
                    _normal(module.bias, 0.1, generator)
                if getattr(module, "running_mean", None) is not None:
                    _normal(module.running_mean, 0.1, generator)
                    _uniform(module.running_var, 0.5, 1.5, generator)
            elif isinstance(module, (nn.Linear, nn.Conv1d, nn.Conv2d)) and module.bias is not None:
                _normal(module.bias, 0.05, generator)
            for name, (low, high) in QT_RANGES.items():
                parameter = module._parameters.get(name)
                if parameter is not None:
                    _uniform(parameter, low, high, generator)
            if scales and hasattr(module, "scale") and module.scale is None and hasattr(module, "num_heads"):
                head_dim = module.dim // module.num_heads
                factor = float(torch.rand((), generator=generator, dtype=torch.float64)) * 0.6 + 0.7
                module.scale = factor * head_dim ** -0.5
    return model.eval()
