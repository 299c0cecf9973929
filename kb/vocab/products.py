"""Ascend products: one row per product id with its family, label, official names and aliases.

A record lists product ids; upstream pages name products by their official names, and
people type short forms ("a3", "910b").  Every spelling of a product lives in its row,
and the lookup tables the rest of the package uses are derived from the rows.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal, NamedTuple


class ProductDef(NamedTuple):
    """One product (or product family).

    ``family`` is set on a sub-series: a record listing the family supports every
    sub-series, one listing a sub-series says exactly that (the upstream table named
    only it).  ``official`` are the parts of an upstream ``<term>`` (which joins several
    with "/") at the precision the name has.  ``code_words`` are aliases that also name
    the product when they appear as a word in source code (``is_910b``, ``A3_DECODE``);
    ``aliases`` are the other spellings people type.  ``kernel_socs`` are the SoC names kernel
    registrations compile for (``AddConfig("ascend910b")`` in ops-nn / ops-transformer
    ``op_host/*_def.cpp``); a SoC name that is no row's is not one of our products.

    Family and sub-series are one relation, used by every product check
    (:func:`product_support`): a sub-series inherits what is stated for its family; a
    family target with a fact about only some of its sub-series is ``partial``, which
    checks report as a warning naming the sub-series (:func:`sub_series_in`).

    ``socs`` are the SoC names and numeric ids torch_npu's ``SocVersion`` gives the product's chips (what
    ``get_soc_version()`` returns and ``get_device_name()`` starts with), from Ascend/pytorch
    9e73e708ab9350d203475609f36f8a43f6a0c2ab torch_npu/csrc/core/npu/NpuVariables.h lines
    5-35 (enum ``SocVersion``; NpuVariables.cpp spells ``Ascend910B4_1`` "Ascend910B4-1");
    ``feature_words`` name a feature only this product has (a code path taken for it
    runs there).  ``inference_only`` marks inference products (cards and servers sold
    for serving): a training path (a backward pass) is not code that runs there.
    """

    id: str
    label: str
    family: str | None = None
    official: tuple[str, ...] = ()
    code_words: tuple[str, ...] = ()
    aliases: tuple[str, ...] = ()
    kernel_socs: tuple[str, ...] = ()
    socs: tuple[tuple[str, int], ...] = ()
    feature_words: tuple[str, ...] = ()
    inference_only: bool = False


# SoC names: ops-nn commit b927bff23 ("Arch编码更新", 2026-01-29) renamed the Ascend 950
# registrations from "ascend910_95" to "ascend950"; older trees (ops-transformer
# c29bc10) still say ascend910_95.  A registration cannot say PR or DT: the family.
PRODUCTS: tuple[ProductDef, ...] = (
    # Microscaling (MX) formats are an Ascend 950 feature: a code path taken for them is
    # a 950 path (the records document MX schemes on 950; one op also on A2/A3 training),
    # while a path taken without them runs anywhere.  "mx" alone is read as such a word
    # too: every MX operator (npu_dynamic_mx_quant ...) is documented for 950 only.
    ProductDef(
        "ascend-950",
        "Ascend 950PR/950DT",
        code_words=("a5", "950", "ascend950"),
        aliases=("ascend 950",),
        socs=(("Ascend950", 260),),
        feature_words=("mxfp8", "mxfp4", "mxfp", "mx"),
        kernel_socs=("ascend950", "ascend910_95"),
    ),
    ProductDef("ascend-950pr", "Ascend 950PR", "ascend-950", ("Ascend 950PR",), aliases=("950pr",)),
    ProductDef("ascend-950dt", "Ascend 950DT", "ascend-950", ("Ascend 950DT",), aliases=("950dt",)),
    ProductDef(
        "atlas-a3",
        "Atlas A3 training/inference series",
        code_words=("a3", "910c"),
        aliases=("atlas a3", "ascend910c", "910_93"),
        socs=(
            ("Ascend910_9391", 250),
            ("Ascend910_9392", 251),
            ("Ascend910_9381", 252),
            ("Ascend910_9382", 253),
            ("Ascend910_9372", 254),
            ("Ascend910_9362", 255),
            ("Ascend910_9363", 256),
        ),
        kernel_socs=("ascend910_93",),
    ),
    ProductDef(
        "atlas-a3-training",
        "Atlas A3 training series",
        "atlas-a3",
        ("Atlas A3 训练系列产品",),
        aliases=("a3 training",),
    ),
    ProductDef(
        "atlas-a3-inference",
        "Atlas A3 inference series",
        "atlas-a3",
        ("Atlas A3 推理系列产品",),
        aliases=("a3 inference",),
        inference_only=True,
    ),
    ProductDef(
        "atlas-a2",
        "Atlas A2 training/inference series (800I A2, A200I A2 Box)",
        code_words=("a2", "910b"),
        aliases=("atlas a2", "ascend910b"),
        socs=(
            ("Ascend910B1", 220),
            ("Ascend910B2", 221),
            ("Ascend910B2C", 222),
            ("Ascend910B3", 223),
            ("Ascend910B4", 224),
            ("Ascend910B4_1", 225),
        ),
        kernel_socs=("ascend910b",),
    ),
    ProductDef(
        "atlas-a2-training",
        "Atlas A2 training series",
        "atlas-a2",
        ("Atlas A2 训练系列产品",),
        aliases=("800t a2", "a2 training"),
    ),
    # "Atlas 800I A2" and the A200I A2 Box are members of the Atlas A2 inference series.
    ProductDef(
        "atlas-a2-inference",
        "Atlas A2 inference series (800I A2, A200I A2 Box)",
        "atlas-a2",
        ("Atlas A2 推理系列产品", "Atlas 800I A2 推理产品", "A200I A2 Box 异构组件"),
        code_words=("800i",),
        aliases=("800i a2", "atlas 800i a2", "a2 inference"),
        inference_only=True,
    ),
    ProductDef(
        "atlas-inference",
        "Atlas inference series (300I Pro/Duo cards)",
        None,
        ("Atlas 推理系列产品", "Atlas 推理系列加速卡产品"),
        ("310p", "300i"),
        ("300i duo", "300i pro", "atlas 300i duo"),
        kernel_socs=("ascend310p",),
        inference_only=True,
        socs=(
            ("Ascend310P1", 200),
            ("Ascend310P2", 201),
            ("Ascend310P3", 202),
            ("Ascend310P4", 203),
            ("Ascend310P5", 204),
            ("Ascend310P7", 205),
        ),
    ),
    ProductDef(
        "atlas-training",
        "Atlas training series (910 first generation)",
        None,
        ("Atlas 训练系列产品",),
        aliases=("910", "910a", "ascend910"),
        kernel_socs=("ascend910",),
        socs=(
            ("Ascend910PremiumA", 100),
            ("Ascend910ProA", 101),
            ("Ascend910A", 102),
            ("Ascend910ProB", 103),
            ("Ascend910B", 104),
        ),
    ),
    ProductDef(
        "atlas-200i-500-a2",
        "Atlas 200I/500 A2 inference",
        None,
        ("Atlas 200I/500 A2 推理产品",),
        aliases=("310b",),
        kernel_socs=("ascend310b",),
        inference_only=True,
        socs=(
            ("Ascend310B1", 240),
            ("Ascend310B2", 241),
            ("Ascend310B3", 242),
            ("Ascend310B4", 243),
        ),
    ),
)

#: Words that name the NPU backend, and the other backends a device test may name
#: (``is_cpu()``, ``device.type == "cuda"``): a branch taken for one of those is not an
#: NPU build's (the scanner's device context).
NPU_BACKEND_WORDS: frozenset[str] = frozenset({"npu", "ascend"})
OTHER_BACKEND_WORDS: frozenset[str] = frozenset(
    {
        "cpu",
        "cuda",
        "gpu",
        "hip",
        "rocm",
        "xpu",
        "mps",
        "musa",
        "mlu",
        "gcu",
        "tpu",
        "xla",
        "dcu",
        "maca",
    }
)

PRODUCT_IDS: tuple[str, ...] = tuple(p.id for p in PRODUCTS)
if TYPE_CHECKING:
    Product = str
else:
    Product = Literal[PRODUCT_IDS]

#: Sub-series → family.
PRODUCT_FAMILY: dict[Product, Product] = {p.id: p.family for p in PRODUCTS if p.family}
#: Official product names (the parts of an upstream ``<term>``) → id.
PRODUCT_OFFICIAL_NAMES: dict[str, Product] = {n: p.id for p in PRODUCTS for n in p.official}
PRODUCT_LABELS: dict[Product, str] = {p.id: p.label for p in PRODUCTS}
PRODUCT_ALIASES: dict[str, Product] = {
    a: p.id for p in PRODUCTS for a in (*p.code_words, *p.aliases)
}
#: Kernel registration SoC names (``AddConfig("ascend910b")``) → id.
PRODUCT_SOCS: dict[str, Product] = {soc: p.id for p in PRODUCTS for soc in p.kernel_socs}
#: Words that name a product inside source code (the scanner's context hints).
PRODUCT_CODE_WORDS: dict[str, Product] = {w: p.id for p in PRODUCTS for w in p.code_words}
#: Words naming a feature only one product has: a path taken for it runs there.
PRODUCT_FEATURE_WORDS: dict[str, Product] = {w: p.id for p in PRODUCTS for w in p.feature_words}
#: Products sold for inference only, where training paths do not run.
INFERENCE_ONLY_PRODUCTS: frozenset[str] = frozenset(p.id for p in PRODUCTS if p.inference_only)
#: torch_npu SoC id (``get_soc_version()``) → product.
SOC_ID_PRODUCTS: dict[int, Product] = {n: p.id for p in PRODUCTS for _s, n in p.socs}
#: SoC name in lower case (``get_device_name()``, ``Ascend910B1``) → product.
SOC_NAME_PRODUCTS: dict[str, Product] = {s.lower(): p.id for p in PRODUCTS for s, _n in p.socs}


def product_family(product: str) -> str:
    """The family id of a product (a family is its own family)."""
    return PRODUCT_FAMILY.get(product, product)


def product_members(product: str) -> tuple[str, ...]:
    """The sub-series of a family id (empty for a sub-series or a product without any)."""
    return _MEMBERS.get(product, ())


#: Family id → its sub-series, in table order (asked for every rule of every candidate).
_MEMBERS: dict[str, tuple[str, ...]] = {
    family: tuple(s for s, fam in PRODUCT_FAMILY.items() if fam == family)
    for family in PRODUCT_FAMILY.values()
}


def collapse_products(products: list[str]) -> list[str]:
    """Replace a complete set of sub-series by their family, keeping first-seen order."""
    out: list[str] = []
    for p in products:
        fam = product_family(p)
        members = product_members(fam)
        if fam != p and members and all(m in products or fam in products for m in members):
            p = fam
        if p not in out:
            out.append(p)
    return [p for p in out if not (product_family(p) != p and product_family(p) in out)]


def product_support(target: str, supported: list[str], unsupported: list[str] = ()) -> str:  # type: ignore[assignment]
    """How a record's product lists cover a target product.

    ``yes``: the target (or its family) is listed as supported; ``no``: the target (or
    its family, or every one of its sub-series) is listed as unsupported; ``partial``:
    the target is a family and only some of its sub-series are listed as supported;
    ``undocumented``: none of these — the tables say nothing about it.
    """
    fam = product_family(target)
    if target in supported or fam in supported:
        return "yes"
    members = product_members(target)
    if target in unsupported or fam in unsupported:
        return "no"
    if members and all(m in unsupported for m in members):
        return "no"
    if members and any(m in supported for m in members):
        return "partial"
    return "undocumented"


def sub_series_in(target: str, products: list[str]) -> tuple[str, ...]:
    """The sub-series of family ``target`` that ``products`` names (the ``partial`` case of
    :func:`product_support`): what a warning about a family target should name."""
    return tuple(m for m in product_members(target) if m in products)


def products_from_official(name: str) -> list[Product] | None:
    """Ids for an upstream ``<term>`` text ("/"-joined names), None if a part is unknown.

    A complete set of sub-series collapses to the family: "Atlas A2 训练系列产品/Atlas A2
    推理系列产品" is ``[atlas-a2]``, "Atlas A2 训练系列产品" alone is ``[atlas-a2-training]``.
    """
    cleaned = " ".join(name.split())
    if cleaned in PRODUCT_OFFICIAL_NAMES:
        return [PRODUCT_OFFICIAL_NAMES[cleaned]]
    found: list[str] = []
    for part in cleaned.split("/"):
        pid = PRODUCT_OFFICIAL_NAMES.get(part.strip())
        if pid is None:
            return None
        found.append(pid)
    return collapse_products(found)


def product_from_official(name: str) -> Product | None:
    """The single id an upstream ``<term>`` text stands for (None if unknown or several)."""
    found = products_from_official(name)
    if found is None:
        return None
    fams = {product_family(p) for p in found}
    if len(found) == 1:
        return found[0]
    return fams.pop() if len(fams) == 1 else None
