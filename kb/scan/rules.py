"""KB5xx: how Python calls a torch_npu operator (scan only).

The binding (:mod:`kb.scan.binding`) emits these units' findings while it maps a call's
arguments onto the schema, since only it knows which argument went where (the reader
emits KB500); the units carry the code, severity and documentation (summary, why, a
failing and a fixed snippet of Python) so ``kb rules``, the site and ``--select/--ignore``
treat them like every other rule.  What is the same
question as in ``kb check`` (unknown operator, unknown keyword, a value outside the
allowed set, product, release) keeps its KB1xx/KB2xx code.
"""

from __future__ import annotations

from kb.lint.unit import RuleUnit

_IMPORT = "import torch\nimport torch_npu\n\n\n"


class ScanRule(RuleUnit):
    """Documentation for a finding the scanner makes while reading Python."""

    fronts = ("scan",)
    language = "python"


class SourceUnreadable(ScanRule):
    code = "KB500"
    name = "source-unreadable"
    summary = "A Python file that cannot be read as source: syntax error, bad encoding, binary or too large."
    why = (
        "The scanner parses files with Python's own parser and never imports them; a file it "
        "cannot parse is reported once, at the position the parser gives, and the scan goes "
        "on with the other files."
    )
    fail = _IMPORT + "def norm(x, g):\n    return torch_npu.npu_rms_norm(x, g, epsilon=1e-6\n"
    fix = _IMPORT + "def norm(x, g):\n    return torch_npu.npu_rms_norm(x, g, epsilon=1e-6)\n"


class TooManyPositional(ScanRule):
    code = "KB501"
    name = "too-many-positional"
    summary = "More positional arguments than the operator has parameters."
    why = (
        "Python raises a TypeError at the first call. Usually an argument list was copied "
        "from another version of the operator; check the signature with 'kb show'."
    )
    fail = _IMPORT + "def act(x):\n    return torch_npu.npu_swiglu(x, -1, True)\n"
    fix = _IMPORT + "def act(x):\n    return torch_npu.npu_swiglu(x, -1)\n"


class KeywordOnlyPositional(ScanRule):
    code = "KB502"
    name = "keyword-only-positional"
    summary = (
        "A positional argument lands on a keyword-only parameter (one after '*' in the schema)."
    )
    why = (
        "Fused operators take most options after '*': they must be passed by name. A "
        "positional value there raises a TypeError, and the message names the keyword to use."
    )
    fail = _IMPORT + 'def act(x):\n    return torch_npu.npu_gelu(x, "tanh")\n'
    fix = _IMPORT + 'def act(x):\n    return torch_npu.npu_gelu(x, approximate="tanh")\n'


class MissingRequired(ScanRule):
    code = "KB503"
    name = "missing-required-argument"
    summary = "A required parameter (no default) is not passed."
    why = (
        "The call raises a TypeError. When the call also expands an unknown **kwargs or "
        "*args, the scanner cannot know what is passed and says nothing."
    )
    fail = _IMPORT + "def norm(x):\n    return torch_npu.npu_rms_norm(x)[0]\n"
    fix = _IMPORT + "def norm(x, g):\n    return torch_npu.npu_rms_norm(x, g)[0]\n"


class DuplicateArgument(ScanRule):
    code = "KB504"
    name = "duplicate-argument"
    summary = "A parameter is given both by position and by keyword."
    why = "Python raises 'got multiple values for argument' at the first call."
    fail = _IMPORT + "def norm(x, g):\n    return torch_npu.npu_rms_norm(x, g, gamma=g)[0]\n"
    fix = _IMPORT + "def norm(x, g):\n    return torch_npu.npu_rms_norm(x, gamma=g)[0]\n"


class BindingKeyword(ScanRule):
    code = "KB505"
    name = "binding-keyword"
    summary = "A keyword that the other binding uses: input= on torch.ops, self= on torch_npu."
    why = (
        "The torch_npu functions are generated Python bindings that rename the schema's 'self' "
        "to 'input'; torch.ops.npu overloads take the schema names. The same keyword cannot "
        "work for both spellings of the call."
    )
    fail = "import torch\n\n\ndef act(x):\n    return torch.ops.npu.npu_swiglu(input=x, dim=-1)\n"
    fix = "import torch\n\n\ndef act(x):\n    return torch.ops.npu.npu_swiglu(self=x, dim=-1)\n"


class TensorListExpected(ScanRule):
    code = "KB506"
    name = "tensor-list-expected"
    summary = (
        "One tensor (by its annotation) passed where the schema takes a list of tensors (Tensor[])."
    )
    why = (
        "Grouped kernels take their weights and scales as Tensor[] lists; a single tensor is "
        "rejected when the call binds. The scanner knows a value is one tensor only from an "
        "annotation such as 'weight: torch.Tensor', so other values stay unjudged."
    )
    fail = (
        _IMPORT + "def experts(x: torch.Tensor, weight: torch.Tensor, group_list):\n"
        "    return torch_npu.npu_grouped_matmul([x], weight, group_list=group_list)\n"
    )
    fix = (
        _IMPORT + "def experts(x: torch.Tensor, weight: torch.Tensor, group_list):\n"
        "    return torch_npu.npu_grouped_matmul([x], [weight], group_list=group_list)\n"
    )


class ForeignOperator(ScanRule):
    code = "KB507"
    name = "foreign-operator"
    severity = "info"
    summary = "A torch.ops call of an operator torch_npu does not define: an extension package's, or unknown."
    why = (
        "Kernel packages and engines register their own operators with the dispatcher, some "
        "under torch.ops.npu itself. Such a call is not judged against torch_npu's records: "
        "the scanner names who registers it (the scanned tree, a known extension package) and "
        "checks the call against that registration's schema. A name nobody in sight registers "
        "is reported here, not as an error: the registering package may simply not be scanned."
    )
    fail = "import torch\n\n\ndef mix(x):\n    return torch.ops.my_kernels.fused_mix(x, 2)\n"
    fix = (
        'import torch\n\ntorch.library.define("my_kernels::fused_mix", "(Tensor x, int n) -> Tensor")\n\n\n'
        "def mix(x):\n    return torch.ops.my_kernels.fused_mix(x, 2)\n"
    )


class NotBuilt(ScanRule):
    code = "KB508"
    name = "extension-operator-not-built"
    severity = "warning"
    summary = "An extension package's operator that the package's build for the target product leaves out."
    why = (
        "Kernel packages compile some operators only for some chips: the C++ registers them "
        "under a preprocessor condition that the package's CMake sets per SoC. On a product "
        "whose build leaves an operator out, torch.ops has no such name and the call fails "
        "at run time. The extension record lists where each operator is not built "
        "(scripts/harvest_extensions.py reads it off the build files); the call is judged on "
        "the target product, or on the product the code's own guard names."
    )
    fail = (
        "import torch\nimport sgl_kernel_npu  # noqa: F401\n\n\ndef inverse(x, soc):\n"
        "    if soc.is_a5():\n        return torch.ops.npu.triangular_inverse(x)\n"
        "    return torch.linalg.inv(x)\n"
    )
    fix = (
        "import torch\nimport sgl_kernel_npu  # noqa: F401\n\n\ndef inverse(x, soc):\n"
        "    if soc.is_a5():\n        return torch.linalg.inv(x)\n"
        "    return torch.ops.npu.triangular_inverse(x)\n"
    )


#: The family title of this module's codes (site navigation, ``kb rules``).
FAMILY = "Python calls (scan)"

SOURCE_UNREADABLE = SourceUnreadable()
TOO_MANY_POSITIONAL = TooManyPositional()
KEYWORD_ONLY_POSITIONAL = KeywordOnlyPositional()
MISSING_REQUIRED = MissingRequired()
DUPLICATE_ARGUMENT = DuplicateArgument()
BINDING_KEYWORD = BindingKeyword()
TENSOR_LIST_EXPECTED = TensorListExpected()
FOREIGN_OPERATOR = ForeignOperator()
NOT_BUILT = NotBuilt()
RULES = (
    SOURCE_UNREADABLE,
    TOO_MANY_POSITIONAL,
    KEYWORD_ONLY_POSITIONAL,
    MISSING_REQUIRED,
    DUPLICATE_ARGUMENT,
    BINDING_KEYWORD,
    TENSOR_LIST_EXPECTED,
    FOREIGN_OPERATOR,
    NOT_BUILT,
)
