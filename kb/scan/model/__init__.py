"""Reading unfused modelling code as a porting engineer does: ``nn.Module`` classes,
what their ``__init__`` builds and what their ``forward`` computes (:mod:`.facts`), the
kind of each module (:mod:`.kinds`) and the module inventory of a file
(:mod:`.inventory`); :mod:`.plan` then matches each module and phase to the records."""
