"""A model package split over two files: the model imports its attention, norm and
feed-forward classes from a sibling module (as diffusers' transformers do)."""
