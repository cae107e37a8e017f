"""The measured picks of the example gallery (scripts/build_gallery.py): one module per kind of
example, each function running the real model and returning the example(s) with the figures that
justify its choice of head."""
