"""One table of the spellings modelling code computes with, each mapped to a canonical op.

``torch.softmax``, ``F.softmax``, ``x.softmax`` and ``np.exp`` / sums written out are
read by the model reader (:mod:`kb.scan.model.flow`) as nodes of one small vocabulary,
so the pattern matchers see ``softmax``, ``matmul``, ``cat`` ... whatever the code's
spelling.  External module classes (``nn.Linear``, ``nn.GELU(approximate="tanh")``,
``ColumnParallelLinear``) are leaves with the op their forward computes.  The activation
spellings (``ACT2FN["gelu_pytorch_tanh"]``, ``get_activation("gelu-approximate")``,
``activation_fn="geglu"``) are the second table: a spelling decides which function is
called, never which module a class is.
"""

from __future__ import annotations

import re

# -- functions and tensor methods -------------------------------------------------------------

#: canonical op -> the last components of the dotted names and the tensor methods computing it
_FUNCTIONS: dict[str, tuple[str, ...]] = {
    # tensors keep their values: reads of the same data
    "same": (
        "contiguous",
        "float",
        "half",
        "bfloat16",
        "double",
        "to",
        "type",
        "type_as",
        "clone",
        "detach",
        "cpu",
        "cuda",
        "npu",
        "requires_grad_",
        "dropout",
        "dropout1d",
        "dropout2d",
        "alpha_dropout",
        "as_strided",
        "pin_memory",
        "share_memory_",
        "coalesce",
        "data",
    ),
    # shapes: the same elements in another arrangement
    "view": ("view", "reshape", "view_as", "reshape_as"),
    "unflatten": ("unflatten",),
    "flatten": ("flatten", "ravel"),
    "transpose": ("transpose", "swapaxes", "swapdims", "t", "movedim", "moveaxis"),
    "permute": ("permute",),
    "unsqueeze": ("unsqueeze",),
    "squeeze": ("squeeze",),
    "expand": ("expand", "expand_as", "broadcast_to"),
    "repeat": ("repeat", "tile"),
    "repeat_interleave": ("repeat_interleave",),
    "rearrange": ("rearrange",),
    "einops_repeat": ("einops.repeat",),
    "reduce": ("einops.reduce",),
    # elementwise arithmetic
    "add": ("add", "add_", "__add__"),
    "sub": ("sub", "subtract", "sub_", "rsub"),
    "mul": ("mul", "multiply", "mul_", "__mul__"),
    "div": ("div", "divide", "true_divide", "div_", "floor_divide"),
    "neg": ("neg", "negative", "neg_"),
    "pow": ("pow", "pow_", "float_power", "square"),
    "sqrt": ("sqrt", "sqrt_"),
    "rsqrt": ("rsqrt", "rsqrt_"),
    "reciprocal": ("reciprocal",),
    "exp": ("exp", "exp_"),
    "log": ("log", "log_"),
    "abs": ("abs", "absolute"),
    "tanh": ("tanh", "tanh_"),
    "erf": ("erf",),
    "cos": ("cos",),
    "sin": ("sin",),
    "clamp": ("clamp", "clip", "clamp_", "clamp_min", "clamp_max"),
    "where": ("where",),
    "masked_fill": ("masked_fill", "masked_fill_"),
    "fill": ("fill_", "zero_", "fill_diagonal_"),
    "cast_bool": ("bool", "logical_not", "logical_and", "logical_or"),
    "maximum": ("maximum", "minimum", "fmax", "fmin"),
    # activations
    "sigmoid": ("sigmoid", "sigmoid_", "expit"),
    "silu": ("silu", "swish", "silu_"),
    "gelu": ("gelu",),
    "relu": ("relu", "relu_"),
    "leaky_relu": ("leaky_relu",),
    "softplus": ("softplus",),
    "mish": ("mish",),
    "hardswish": ("hardswish",),
    "elu": ("elu",),
    "quick_gelu": ("quick_gelu",),
    "logsigmoid": ("logsigmoid",),
    # reductions
    "mean": ("mean", "nanmean"),
    "sum": ("sum", "nansum"),
    "var": ("var",),
    "std": ("std",),
    "amax": ("amax", "max"),
    "amin": ("amin", "min"),
    "vector_norm": ("norm", "vector_norm"),
    "logsumexp": ("logsumexp",),
    "cumsum": ("cumsum",),
    "argmax": ("argmax",),
    "any": ("any", "all"),
    # normalisation
    "softmax": ("softmax", "_softmax"),
    "log_softmax": ("log_softmax",),
    "layer_norm": ("layer_norm",),
    "rms_norm": ("rms_norm",),
    "group_norm": ("group_norm",),
    "normalize": ("normalize",),
    # products
    "matmul": ("matmul", "bmm", "mm", "__matmul__", "baddbmm", "addmm", "addbmm", "mv", "dot"),
    "einsum": ("einsum",),
    "linear": ("linear",),
    "outer": ("outer", "ger"),
    "conv": (
        "conv1d",
        "conv2d",
        "conv3d",
        "conv_transpose1d",
        "conv_transpose2d",
        "conv_transpose3d",
    ),
    "embedding": ("embedding",),
    # attention kernels of other libraries (what a port replaces)
    "sdpa": ("scaled_dot_product_attention",),
    "flash_attn": (
        "flash_attn_func",
        "flash_attn_varlen_func",
        "flash_attn_qkvpacked_func",
        "flash_attn_varlen_qkvpacked_func",
        "flash_attn_kvpacked_func",
        "flash_attn_varlen_kvpacked_func",
        "flash_attn_with_kvcache",
        "flash_attn_interface",
    ),
    "xformers_attn": ("memory_efficient_attention", "memory_efficient_attention_forward"),
    # indices and routing
    "topk": ("topk",),
    "sort": ("sort",),
    "argsort": ("argsort",),
    "bincount": ("bincount", "histc"),
    "one_hot": ("one_hot",),
    "nonzero": ("nonzero", "argwhere"),
    "gather": ("gather", "take_along_dim", "index_select"),
    "scatter": ("scatter", "scatter_", "scatter_reduce", "scatter_reduce_"),
    "scatter_add": ("scatter_add", "scatter_add_"),
    "index_add": ("index_add", "index_add_"),
    "index_copy": ("index_copy", "index_copy_"),
    "index_put": ("index_put", "index_put_"),
    "index_fill": ("index_fill", "index_fill_"),
    "copy": ("copy_",),
    "eq": ("eq", "ne", "gt", "lt", "ge", "le", "isin"),
    # joining and splitting
    "cat": ("cat", "concat", "concatenate", "hstack", "vstack"),
    "stack": ("stack",),
    "chunk": ("chunk", "tensor_split"),
    "split": ("split", "split_with_sizes"),
    "unbind": ("unbind",),
    "narrow": ("narrow",),
    "roll": ("roll",),
    "flip": ("flip",),
    # complex numbers
    "view_as_complex": ("view_as_complex",),
    "view_as_real": ("view_as_real",),
    "polar": ("polar",),
    "complex": ("complex",),
    "real": ("real",),
    "imag": ("imag",),
    # new tensors
    "zeros": ("zeros", "zeros_like", "empty", "empty_like", "new_zeros", "new_empty"),
    "ones": ("ones", "ones_like", "new_ones"),
    "full": ("full", "full_like", "new_full", "tensor", "as_tensor", "from_numpy", "new_tensor"),
    "arange": ("arange", "linspace", "range"),
    "random": (
        "randn",
        "rand",
        "randn_like",
        "rand_like",
        "randint",
        "normal",
        "normal_",
        "uniform_",
        "multinomial",
    ),
    "triu": ("triu", "triu_", "triu_indices"),
    "tril": ("tril", "tril_", "tril_indices"),
}

FUNCTIONS: dict[str, str] = {spelling: op for op, names in _FUNCTIONS.items() for spelling in names}

#: dotted prefixes whose functions are read through the table (``torch.nn.functional.silu``)
LIBRARIES: tuple[str, ...] = (
    "torch",
    "numpy",
    "np",
    "einops",
    "flash_attn",
    "flash_attn_interface",
    "xformers",
    "math",
    "torch_npu",
    "apex",
    "F",
)

#: ops that hand on their first operand's elements (rearranged, cast, repeated, narrowed):
#: the pattern matchers look through them
SHAPE_OPS = frozenset(
    {
        "same",
        "contiguous",
        "view",
        "unflatten",
        "flatten",
        "transpose",
        "permute",
        "unsqueeze",
        "squeeze",
        "expand",
        "repeat",
        "rearrange",
        "einops_repeat",
        "repeat_interleave",
        "narrow",
    }
)

#: ops returning a fresh tensor whatever their inputs (their inputs are sizes)
CREATION = frozenset(
    {"zeros", "ones", "full", "arange", "random", "triu", "tril", "param", "input", "state"}
)


def canonical(dotted: str) -> str | None:
    """The canonical op of a function's dotted name or a tensor method name."""
    if dotted in FUNCTIONS:
        return FUNCTIONS[dotted]
    last = dotted.rsplit(".", 1)[-1]
    if dotted.startswith("einops."):
        return FUNCTIONS.get(dotted) or FUNCTIONS.get(last)
    return FUNCTIONS.get(last)


# -- external module classes ----------------------------------------------------------------------

#: leaf op of an external ``nn.Module`` class's forward, by its class name
LEAF_MODULES: dict[str, str] = {
    "Linear": "linear",
    "LazyLinear": "linear",
    "Bilinear": "linear",
    "Conv1D": "linear",
    "NonDynamicallyQuantizableLinear": "linear",
    "Conv1d": "conv",
    "Conv2d": "conv",
    "Conv3d": "conv",
    "ConvTranspose1d": "conv",
    "ConvTranspose2d": "conv",
    "ConvTranspose3d": "conv",
    "Embedding": "embedding",
    "EmbeddingBag": "embedding",
    "LayerNorm": "layer_norm",
    "RMSNorm": "rms_norm",
    "GroupNorm": "group_norm",
    "BatchNorm1d": "batch_norm",
    "BatchNorm2d": "batch_norm",
    "InstanceNorm2d": "batch_norm",
    "GELU": "gelu",
    "SiLU": "silu",
    "ReLU": "relu",
    "Tanh": "tanh",
    "Sigmoid": "sigmoid",
    "Mish": "mish",
    "Hardswish": "hardswish",
    "ELU": "elu",
    "LeakyReLU": "leaky_relu",
    "Softplus": "softplus",
    "Softmax": "softmax",
    "ReLU6": "relu",
    "MultiheadAttention": "mha",
    "Dropout": "same",
    "Dropout1d": "same",
    "Dropout2d": "same",
    "Dropout3d": "same",
    "AlphaDropout": "same",
    "Identity": "same",
    "Flatten": "flatten",
    "Unflatten": "unflatten",
    "Upsample": "resize",
    "AvgPool2d": "pool",
    "MaxPool2d": "pool",
    "AdaptiveAvgPool2d": "pool",
    "PixelShuffle": "resize",
    "PixelUnshuffle": "resize",
}

#: modules of public libraries the reader does not follow, by dotted path, with what their
#: forward computes (torch's and timm's documented semantics)
LIBRARY_MODULES: dict[str, str] = {
    "torch.nn.MultiheadAttention": "mha",
    "torch.nn.modules.activation.MultiheadAttention": "mha",
    "timm.models.vision_transformer.Attention": "vit_attention",
    "timm.layers.Attention": "vit_attention",
    "timm.layers.attention.Attention": "vit_attention",
    "timm.models.vision_transformer.Mlp": "mlp",
    "timm.models.layers.Mlp": "mlp",
    "timm.layers.Mlp": "mlp",
    "timm.layers.mlp.Mlp": "mlp",
    "timm.models.layers.mlp.Mlp": "mlp",
    # diffusers' building blocks built in place (kb.scan.model.libbases reads their forward)
    "diffusers.models.attention_processor.Attention": "diffusers_attention",
    "diffusers.models.attention.Attention": "diffusers_attention",
    "diffusers.models.attention.FeedForward": "diffusers_ff",
    "diffusers.models.activations.GELU": "diffusers_act",
    "diffusers.models.activations.GEGLU": "diffusers_act",
    "diffusers.models.activations.ApproximateGELU": "diffusers_act",
    "diffusers.models.activations.SwiGLU": "diffusers_act",
    "diffusers.models.activations.LinearActivation": "diffusers_act",
    "diffusers.models.normalization.AdaLayerNormZero": "diffusers_adaln",
    "diffusers.models.normalization.AdaLayerNormZeroSingle": "diffusers_adaln",
    "diffusers.models.normalization.AdaLayerNormContinuous": "diffusers_adaln",
}
#: the ops of LIBRARY_MODULES whose forward kb.scan.model.libbases writes out
LIBRARY_CONVENTIONS = frozenset(
    {"diffusers_attention", "diffusers_ff", "diffusers_act", "diffusers_adaln"}
)

#: external classes that hold other modules
CONTAINERS = frozenset({"Sequential", "ModuleList", "ModuleDict", "ParameterList", "ParameterDict"})

#: an external class whose name ends so computes a linear projection (tensor-parallel
#: linears of fairscale, Megatron, vLLM, LoRA wrappers): the leaf is all the reader has
_LINEAR_NAME = re.compile(r"(Linear|LinearBase|Conv1D)(Layer|WithLoRA)?$")


def leaf_op(class_name: str) -> str | None:
    """The op an external module class computes, or None when the name says nothing."""
    if class_name in LIBRARY_MODULES:
        return LIBRARY_MODULES[class_name]
    last = class_name.rsplit(".", 1)[-1]
    if last in LEAF_MODULES:
        return LEAF_MODULES[last]
    if _LINEAR_NAME.search(last):
        return "linear"
    if last.endswith("RMSNorm"):
        return "rms_norm"
    if last.endswith("LayerNorm"):
        return "layer_norm"
    return None


# -- activations ----------------------------------------------------------------------------------

#: activation kind -> the spellings of it in activation tables, config values and keyword values
_ACTIVATIONS: dict[str, tuple[str, ...]] = {
    "silu": ("silu", "swish", "silu_and_mul", "swiglu"),
    "gelu": ("gelu", "geglu", "gelu_python", "gelu_erf", "gelu_accurate_erf"),
    "gelu_tanh": (
        "gelu_new",
        "gelu_pytorch_tanh",
        "gelu_fast",
        "gelu-approximate",
        "gelu_approximate",
        "gelu_tanh",
        "geglu-approximate",
        "geglu_approximate",
        "gelu_accurate",
        "tanh_gelu",
    ),
    "quick_gelu": ("quick_gelu", "quickgelu", "gelu_quick"),
    "relu": ("relu", "relu6", "reglu"),
    "relu2": ("relu2", "relu_squared", "squared_relu"),
    "sigmoid": ("sigmoid",),
    "tanh": ("tanh",),
    "mish": ("mish",),
    "linear": ("linear", "identity", "none"),
}

ACTIVATION_SPELLINGS: dict[str, str] = {
    s: kind for kind, names in _ACTIVATIONS.items() for s in names
}

#: spellings that name a gated unit: the activation gates one half of a merged projection
GATED_SPELLINGS = frozenset(
    {"swiglu", "geglu", "geglu-approximate", "geglu_approximate", "reglu", "silu_and_mul"}
)

#: the names of lookup tables and factories that return an activation for a spelling
ACTIVATION_LOOKUPS = frozenset(
    {
        "ACT2FN",
        "ACT2CLS",
        "get_activation",
        "get_act_fn",
        "get_act_layer",
        "ACTIVATION_FUNCTIONS",
        "ACT_FNS",
        "activation_fn_map",
    }
)

#: the canonical op of each activation kind when it is called as a function
ACTIVATION_OPS: dict[str, str] = {
    "silu": "silu",
    "gelu": "gelu",
    "gelu_tanh": "gelu",
    "quick_gelu": "quick_gelu",
    "relu": "relu",
    "sigmoid": "sigmoid",
    "tanh": "tanh",
    "mish": "mish",
    "relu2": "relu2",
    "linear": "same",
}


def activation_kind(spelling: object) -> str | None:
    """The activation a spelling selects (``"gelu_pytorch_tanh"`` -> ``gelu_tanh``)."""
    if not isinstance(spelling, str):
        return None
    key = spelling.strip().lower()
    if key in ACTIVATION_SPELLINGS:
        return ACTIVATION_SPELLINGS[key]
    return ACTIVATION_SPELLINGS.get(key.replace("-", "_"))
