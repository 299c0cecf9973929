"""The configuration class of the tiny package: its base a dataclass named as HF names its
own, the subclass with a constructor of its own (as remote-code configs over transformers'
dataclass base are)."""

from dataclasses import dataclass


@dataclass(init=False)
class PretrainedConfig:
    model_type: str = ""

    def __init__(self, **kwargs):
        for key, value in kwargs.items():
            setattr(self, key, value)

    def to_dict(self):
        return dict(vars(self))


class TinyConfig(PretrainedConfig):
    model_type = "tiny"

    def __init__(self, hidden_size=1024, intermediate_size=4096, rms_norm_eps=1e-6, **kwargs):
        self.hidden_size = hidden_size
        self.intermediate_size = intermediate_size
        self.rms_norm_eps = rms_norm_eps
        super().__init__(**kwargs)
