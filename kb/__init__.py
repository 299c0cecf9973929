"""torch_npu fused-operator knowledge base: records, search, checker and site."""

__version__ = "0.1.0"
