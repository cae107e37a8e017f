"""The web layer: the FastAPI app (:func:`sparsescope.web.main.create_app`), its routes, schemas,
middleware, pages and the HTTP mapping of the engine's errors. It calls the engine
(:mod:`sparsescope.engine`) and never the other way round."""
