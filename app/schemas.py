"""Request and response models: the web contract of docs/architecture.md ("Web contract (app/)").

The page (frontend/js) is built against exactly these shapes; docs/api.md shows an example of each.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

# ----------------------------------------------------------------------------- errors, health


class ErrorOut(BaseModel):
    """Every error body: what was wrong and what is allowed, and the field at fault (or null)."""

    detail: str = Field(examples=["alpha must be in [1, 2], got 3.0"])
    field: str | None = Field(None, examples=["alpha"])


class Health(BaseModel):
    status: Literal["ok"] = "ok"
    model: str
    device: Literal["cpu", "cuda"]
    artefact: str | None = Field(None, description="the Sparsefinder artefact in use at alpha 1.5")
    version: str


# ----------------------------------------------------------------------------- methods


class ParamSpecOut(BaseModel):
    """One slider of a method; ``default`` is resolved for the text length n."""

    name: str
    label: str
    kind: Literal["int", "float", "choice", "bool"]
    min: int | float | None = None
    max: int | float | None = None
    step: int | float | None = None
    choices: list[Any] | None = None
    default: Any = None
    help: str = ""


class MethodOut(BaseModel):
    name: str
    label: str
    needs_artefact: bool
    params: list[ParamSpecOut]


class MethodsOut(BaseModel):
    methods: list[MethodOut]


# ----------------------------------------------------------------------------- analyze


class AnalyzeRequest(BaseModel):
    """``POST /api/analyze``. alpha is checked against [1, 2] by the service (a 400 naming it)."""

    # strict: JSON types as declared (no "true" -> True, false -> 0, "1.5" -> 1.5)
    model_config = ConfigDict(extra="forbid", strict=True)

    text: str = Field(description="the text to analyse (not empty; at most the model's positions)")
    alpha: float = Field(1.5, description="entmax alpha in [1, 2]: 1 softmax, 1.5, 2 sparsemax")
    causal: bool = Field(False, description="mask future keys (decoder-style)")
    truncate: bool = Field(False, description="keep the first positions of a too long text")


class TokenOut(BaseModel):
    text: str
    start: int = Field(description="character offset in the text (0 for special tokens)")
    end: int
    pos: str | None = Field(None, description="Universal POS tag of the word holding the token")
    special: bool


class MethodScore(BaseModel):
    recall: float
    sparsity: float


class HeadSummary(BaseModel):
    layer: int
    head: int
    gold_sparsity: float
    methods: dict[str, MethodScore] = Field(
        default_factory=dict, description="each method at its defaults for this n"
    )


class Analysis(BaseModel):
    """``POST /api/analyze`` and ``GET /api/analyses/{id}``."""

    id: str = Field(description="hex hash of (text, alpha, causal, truncate, model, artefact)")
    n: int
    layers: int
    heads: int
    model: str
    device: Literal["cpu", "cuda"]
    alpha: float
    causal: bool
    truncated: bool
    artefact: str | None = Field(
        None, description="the Sparsefinder artefact used (null: sf-* methods are unavailable)"
    )
    tokens: list[TokenOut]
    summary: list[HeadSummary]
    methods: list[MethodOut]


# ----------------------------------------------------------------------------- one head


class Projections(BaseModel):
    queries: list[list[float]] = Field(description="projected queries q~ (n x r)")
    keys: list[list[float]] = Field(description="projected keys k~ (n x r)")


class RoutingMembers(BaseModel):
    queries: list[list[int]] = Field(description="per centroid c, the query tokens it chose")
    keys: list[list[int]]


class HeadPayload(BaseModel):
    """``GET /api/analyses/{id}/heads/{layer}/{head}``: all the page needs to redraw one head."""

    layer: int
    head: int
    n: int
    gold_sparsity: float
    edges: list[tuple[int, int, float]] = Field(description="[i, j, p] for every p > 0")
    proj: Projections | None = Field(None, description="null without a Sparsefinder artefact")
    centroids: dict[str, list[list[float]]] = Field(default_factory=dict)
    reformer: dict[str, list[list[int]]] = Field(default_factory=dict)
    routing: dict[str, RoutingMembers] = Field(default_factory=dict)
    seed: int
    pos: list[str | None]


# ----------------------------------------------------------------------------- pareto, metrics


class Metrics(BaseModel):
    recall: float
    sparsity: float
    exact: float
    precision: float


class ParetoPoint(Metrics):
    method: str
    params: dict[str, Any]


class Pareto(BaseModel):
    scope: Literal["head", "mean"]
    layer: int | None = None
    head: int | None = None
    gold_sparsity: float
    points: list[ParetoPoint]
    frontiers: dict[str, list[int]] = Field(description="per method, indices into points")


class Cluster(BaseModel):
    id: int
    queries: dict[str, float] = Field(description="UPOS tag -> share among its queries")
    keys: dict[str, float] = Field(description="UPOS tag -> share among its keys")
    n_queries: int
    n_keys: int
    examples: list[str] = Field(description="its most frequent (non-special) tokens")


class Clusters(BaseModel):
    """The ``sparsescope clusters --json`` shape for this text (sparse_core.pos)."""

    layer: int
    head: int
    clusters: list[Cluster]
