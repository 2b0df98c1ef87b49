"""`tracegrad.eager.nn`: Module, Parameter, layers, activations, Sequential, losses.

Layers: Linear, Conv1d/Conv2d, ConvTranspose1d/2d, MaxPool2d, AvgPool2d, AdaptiveAvgPool2d,
Flatten/Unflatten, Dropout, BatchNorm1d/2d, LayerNorm, GroupNorm, Embedding, RNN/LSTM/GRU,
MultiheadAttention, TransformerEncoder(Layer); activations ReLU, Tanh, Sigmoid, GELU, SiLU,
LeakyReLU, ELU, Softplus, Softmax, LogSoftmax; losses CrossEntropyLoss, NLLLoss, MSELoss,
L1Loss, SmoothL1Loss, HuberLoss, BCELoss, BCEWithLogitsLoss, KLDivLoss; containers
Sequential, ModuleList, ModuleDict, ParameterList, ParameterDict; `nn.init`, `nn.utils`.
Each is a composition of the rule table's primitives (GELU's erf is the one eager-only
primitive), with PyTorch's parameter names, reprs, node names and error texts.

    >>> import tracegrad.eager as torch
    >>> from tracegrad.eager import nn
    >>> torch.manual_seed(0) and None
    >>> model = nn.Sequential(nn.Linear(2, 3), nn.ReLU(), nn.Linear(3, 1))
    >>> model
    Sequential(
      (0): Linear(in_features=2, out_features=3, bias=True)
      (1): ReLU()
      (2): Linear(in_features=3, out_features=1, bias=True)
    )
    >>> len(list(model.parameters())), model[0].weight.shape
    (4, torch.Size([3, 2]))
"""

from tracegrad.eager.nn import (
    functional,
    init,
    utils,
)
from tracegrad.eager.nn.modules import (
    ELU,
    GELU,
    GRU,
    LSTM,
    RNN,
    AdaptiveAvgPool2d,
    AvgPool2d,
    BatchNorm1d,
    BatchNorm2d,
    BCELoss,
    BCEWithLogitsLoss,
    Conv1d,
    Conv2d,
    ConvTranspose1d,
    ConvTranspose2d,
    CrossEntropyLoss,
    Dropout,
    Embedding,
    Flatten,
    GroupNorm,
    HuberLoss,
    Identity,
    KLDivLoss,
    L1Loss,
    LayerNorm,
    LeakyReLU,
    Linear,
    LogSoftmax,
    MaxPool2d,
    Module,
    ModuleDict,
    ModuleList,
    MSELoss,
    MultiheadAttention,
    NLLLoss,
    Parameter,
    ParameterDict,
    ParameterList,
    ReLU,
    Sequential,
    Sigmoid,
    SiLU,
    SmoothL1Loss,
    Softmax,
    Softplus,
    Tanh,
    TransformerEncoder,
    TransformerEncoderLayer,
    Unflatten,
)
from tracegrad.eager.nn.transformer import (
    Transformer,
    TransformerDecoder,
    TransformerDecoderLayer,
)
