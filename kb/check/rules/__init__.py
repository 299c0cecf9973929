"""Checker rules, one small unit each, grouped by code prefix (KB0 file, KB1 operator,
KB2 product/version/quantization, KB3 workflow, KB4 prefetch)."""
