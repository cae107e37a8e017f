"""The engine: the served models and everything done with them, without a web framework.

Model slots and their workers (batching), the analysis cache, limits, memory, POS tagging, the
JSON bodies of analyses, the share store and the :class:`~sparsescope.engine.service.
AnalysisService` facade. No module here imports FastAPI, Starlette, uvicorn or Jinja2
(tests/app/test_layout_app.py); the web layer (:mod:`sparsescope.web`), the command line
(:mod:`sparsescope.commands`) and the notebook widget build on it.
"""
