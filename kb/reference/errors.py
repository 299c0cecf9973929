"""The one error a reference call raises for input it will not compute on."""

from __future__ import annotations


class ReferenceInputError(ValueError):
    """An argument outside the operator record's constraints (or outside what the
    reference models); the message names the constraint."""


class NotModelled(ReferenceInputError):
    """Input the record allows but the reference does not compute (a listed limit)."""


class OverCap(ReferenceInputError):
    """A call whose outputs and intermediates, estimated from its shapes, pass the cap the
    caller set (:func:`kb.reference.limit`): refused before anything is allocated."""
