"""Every pydantic model of the API: the web contract of docs/architecture.md ("Web contract").

The page (frontend/js) is built against exactly these shapes; docs/api.md shows an example of each.
The share state (:class:`ShareState`) is also the form in which share links and the example
gallery (static/gallery/examples.json, :class:`Gallery`) are stored.
"""

from __future__ import annotations

import math
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PlainValidator,
    StringConstraints,
    WithJsonSchema,
    field_validator,
    model_validator,
)

from sparse_core.methods import METHODS
from sparse_core.view_schema import FIELDS as VIEW

from .openapi import NOT_BLANK, bounded, served
from .view_state import ViewBase, inline_defs, view_flags_model


def _whole(value: Any) -> Any:
    """A whole JSON number as the integer it is: JSON has one number type, and JSON Schema's
    ``integer`` (draft 6 on, OpenAPI 3.1) holds 3.0 as it holds 3; anything else is left to the
    strict check (3.5, "3" and true stay refused)."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


class JsonBody(BaseModel):
    """A strict JSON body whose integer fields take a whole number written as a float (3.0 is 3;
    no "3" or true): converted before the strict check, so the schema keeps its bounds."""

    @model_validator(mode="before")
    @classmethod
    def _whole_numbers(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        ints = {n for n, f in cls.model_fields.items() if f.annotation in (int, int | None)}
        return {k: _whole(v) if k in ints else v for k, v in data.items()}


#: A method name of the registry (an enum in the OpenAPI schema), in registry order.
MethodName = Literal[tuple(METHODS)]  # type: ignore[valid-type]

# ----------------------------------------------------------------------------- errors, health


class ErrorOut(BaseModel):
    """Every error body: what was wrong and what is allowed, and the field at fault (or null)."""

    detail: str = Field(examples=["alpha must be in [1, 2], got 3.0"])
    field: str | None = Field(None, examples=["alpha"])


class ComputeLoad(BaseModel):
    """The compute gate now: what runs and waits, what it admitted, refused and cancelled, and
    the seconds per token it measured (per kind of work and length class)."""

    running: int
    waiting: int
    slots: int
    memory_bytes: int
    running_bytes: int
    admitted: int
    completed: int
    refused: int
    cancelled: int = Field(description="stopped while running: the client went away")
    dropped: int = Field(description="dropped while waiting: the client went away")
    checkpoints: int = Field(description="heads and row blocks read by every computation so far")
    seconds_per_token: dict[str, float] = Field(description='"kind@length class" -> seconds')


class Health(BaseModel):
    status: Literal["ok"] = "ok"
    model: str = Field(description="the default model's id")
    models: list[str] = Field(default_factory=list, description="every served model's id")
    device: Literal["cpu", "cuda"]
    artefact: str | None = Field(None, description="the Sparsefinder artefact in use at alpha 1.5")
    version: str
    compute: ComputeLoad | None = Field(
        None, description="the derived work's admission (app/engine/admission.py): load, counters"
    )


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
    #: its family (sparse_core.methods.FAMILIES: the page's picker groups and plot hues)
    family: str = ""
    family_label: str = ""
    needs_artefact: bool
    available: bool = Field(
        True,
        description="whether it runs on this analysis: the sf-* methods need a Sparsefinder "
        "artefact, indexer and seer a trained selector beside it (the summary and the sweeps "
        "list exactly the available methods)",
    )
    payload: bool = Field(
        description="the page needs the head's methods' part (GET …/heads/{layer}/{head}"
        "?part=methods or ?method=) to draw this method: projections, buckets, orders, estimates"
    )
    params: list[ParamSpecOut]


class MethodsOut(BaseModel):
    methods: list[MethodOut]


# ----------------------------------------------------------------------------- analyze


#: The longest text POST /api/analyze reads (422 beyond it): 500,000 characters (about 100,000
#: words, a short book), half of spaCy's ``max_length`` (1,000,000) and within the 1 MiB body cap.
MAX_ANALYZE_CHARS = 500_000


def _alpha_in(value: Any) -> float | str | None:
    """A request's alpha as JSON gives it: a number, "own" or null (the range is the service's
    to check: a 400 naming it)."""
    if value is None or value == "own":
        return value
    if isinstance(value, int | float) and not isinstance(value, bool):
        try:
            return float(value)
        except OverflowError:  # an integer beyond 1.8e308 (309 digits and more): no float
            raise ValueError(
                f'must be a number in [1, 2] or "own" (the model\'s own alpha), got an integer '
                f"of {len(str(abs(value)))} digits"
            ) from None
    raise ValueError(f'must be a number in [1, 2] or "own" (the model\'s own alpha), got {value!r}')


#: alpha's range in the OpenAPI schema (on the number branch; "own" is the other): THE one
#: definition for the analyze body and a share's state (the view's bounds)
ALPHA_RANGE = bounded(minimum=VIEW["alpha"].lo, maximum=VIEW["alpha"].hi)

_AlphaType = float | Literal["own"] | None
AlphaIn = Annotated[_AlphaType, PlainValidator(_alpha_in, json_schema_input_type=_AlphaType)]


class AnalyzeRequest(JsonBody):
    """``POST /api/analyze``. alpha is checked against [1, 2] by the service (a 400 naming it)."""

    # strict: JSON types as declared (no "true" -> True, false -> 0, "1.5" -> 1.5)
    model_config = ConfigDict(extra="forbid", strict=True)

    text: str = Field(
        description="the text to analyse: not blank (some character other than whitespace: "
        "the pattern; control, format such as zero-width, private-use and unassigned "
        "characters and U+FFFD count as blank too) and some of its tokens in the model's "
        "vocabulary (a 400 naming text otherwise: the schema cannot know a vocabulary); at "
        "most the model's positions, or any length up to "
        f"{MAX_ANALYZE_CHARS:,} characters with truncate",
        json_schema_extra={**bounded(minLength=1, maxLength=MAX_ANALYZE_CHARS), **NOT_BLANK},
    )
    # the range in the schema only: the service's check_alpha answers with its own message
    alpha: AlphaIn = Field(
        1.5,
        description='entmax alpha in [1, 2]: 1 softmax, 1.5, 2 sparsemax; "own" (or null): the '
        "model's own alpha (what it was trained with, maybe one per head: `own_alpha`)",
        json_schema_extra=ALPHA_RANGE,
    )
    causal: bool = Field(False, description="mask future keys (decoder-style)")
    truncate: bool = Field(
        False, description="analyse a window of the model's positions of a too long text"
    )
    start: int = Field(
        0,
        ge=0,
        le=10_000_000,
        description="with truncate: the window's first token (of the text's tokens, specials "
        "excluded; moved back to the start of its word and so that the window is full)",
    )
    model: str | None = Field(
        None,
        max_length=300,
        description="a served model's id (GET /api/models); null: the default model",
        json_schema_extra=served("model"),
    )
    summary: list[MethodName] | None = Field(
        None,
        max_length=len(METHODS),
        description="the methods whose per-head figures the body's `summary` rows hold (each "
        "row's `methods`; one the analysis lacks, an sf-* method without an artefact, is left "
        "out); null (the default): every method. Only these are computed before the answer: "
        "the others come from GET /api/analyses/{id}/summary (or /api/analyses/{id}) later. "
        "`[]`: the gold sparsity alone",
    )

    @field_validator("text")
    @classmethod
    def _not_over_the_limit(cls, text: str) -> str:
        # a validator, not max_length: pydantic's length check fails on a lone surrogate first,
        # which the service reports in its own words
        if len(text) > MAX_ANALYZE_CHARS:
            raise ValueError(
                f"must be at most {MAX_ANALYZE_CHARS:,} characters long, got {len(text):,}; "
                "analyse a part of it"
            )
        return text


class ModelCard(BaseModel):
    """What a model is and what it is competent at on held-out data (sparse_core/card.py;
    the figures are measured by ``sparsescope card`` and shipped with the model)."""

    id: str = Field(description="the model's full id")
    label: str = Field(
        description="a friendly name for the picker",
        examples=["MiniLM, adapted with 1.5-entmax", "MiniLM, softmax-trained; entmax applied"],
    )
    attention_training: Literal["entmax", "softmax"] = Field(
        description="how its attention was trained: with entmax, or with softmax (entmax is "
        "then applied at inference only)"
    )
    alpha: dict[str, Any] | None = Field(
        None,
        description='the alpha it was trained with: {"per_head": false, "value"} or '
        '{"per_head": true, "min", "max", "mean"}; null for a softmax-trained model',
    )
    alpha_trained: bool = Field(description='it has an alpha of its own (alpha "own")')
    base: str | None = Field(None, description="the model it was made from")
    objective: str | None = Field(None, description="its training objective")
    data: dict[str, Any] | None = Field(None, description="what it was trained on")
    steps: int | None = Field(None, description="training steps")
    trained: str | None = Field(None, description="which parameters adaptation trained")
    description: str | None = None
    measured: bool = Field(description="whether competence figures were measured for it")
    sts_spearman: float | None = Field(
        None,
        description="STS Spearman (cosine of mean-pooled final hidden states vs gold), mean "
        "over the held-out STS sets, at the model's own alpha",
    )
    sts_spearman_softmax: float | None = Field(
        None, description="the same figure for the softmax original (alpha 1), for comparison"
    )
    sts_alpha: float | list[list[float]] | None = Field(
        None, description="the alpha the STS figure was measured at"
    )
    sts_sets: list[dict[str, Any]] = Field(
        default_factory=list, description="the STS sets (name, pairs) the mean is over"
    )
    sts_per_set: dict[str, float] | None = None
    sts_per_set_softmax: dict[str, float] | None = None
    mlm_loss: float | None = Field(
        None, description="held-out masked-LM loss (nats per masked token), if it has an LM head"
    )
    mlm_unigram_loss: float | None = Field(
        None, description="a context-free unigram model's loss on the same tokens (baseline)"
    )
    mlm_tokens: int | None = None
    mlm_note: str | None = Field(None, description="why there is no masked-LM figure")
    command: str | None = Field(None, description="the command that measured the figures")


class ModelInfo(BaseModel):
    id: str = Field(description="what analyses, shares and URLs name the model by")
    architecture: str = Field(examples=["BERT", "GPT-2", "Llama"])
    model_type: str = Field(description="transformers' model_type", examples=["bert", "gpt2"])
    layers: int
    heads: int = Field(description="query heads per layer")
    kv_heads: int = Field(description="key/value heads per layer (fewer: grouped-query)")
    decoder: bool = Field(description="a decoder is always causal")
    max_tokens: int = Field(description="token limit: the model's positions, capped by a setting")
    device: Literal["cpu", "cuda"]
    artefacts: list[float] = Field(
        description="alphas with a Sparsefinder artefact for this model (the sf-* methods); "
        "empty: `sparsescope fit --model ID` makes one"
    )
    own_alpha: bool = Field(
        False,
        description='trained with entmax: alpha "own" runs it at its own alpha (maybe one per '
        "head); the page picks that by default",
    )
    card: ModelCard | None = Field(None, description="what the model is and is competent at")


class ModelsOut(BaseModel):
    default: str = Field(description="the model used when a request names none")
    models: list[ModelInfo]


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
        default_factory=dict,
        description="each method at its defaults for this n (every one the analysis has, or "
        "those the request named: the analyze request's `summary`, the summary route's `method`)",
    )


class Thumbs(BaseModel):
    """Every head's graph max-pooled into k × k blocks, for the head grid (app/engine/thumbs.py)."""

    k: int = Field(description="side in blocks: min(n, 24)")
    cells: list[str] = Field(
        description="one string per head (layer-major), two block states 0–7 per base64url "
        "character: 0 every p of the block is 0, s ≥ 1 the block's largest p at √p ≈ (s − 1) / 6"
    )


class Analysis(BaseModel):
    """``POST /api/analyze`` and ``GET /api/analyses/{id}``."""

    id: str = Field(
        description="hex hash of (text, alpha, causal, truncate, start, model, artefact)"
    )
    n: int
    layers: int
    heads: int
    model: str
    device: Literal["cpu", "cuda"]
    alpha: float | Literal["own"] = Field(
        description='the alpha it ran at; "own": the model\'s own (per head: `own_alpha`)'
    )
    causal: bool = Field(description="future keys masked (always, on a decoder)")
    decoder: bool = Field(False, description="the model is a decoder (causal locked on)")
    truncated: bool = Field(description="only a window of the text's tokens was analysed")
    total_tokens: int = Field(0, description="the whole text's tokens, specials excluded")
    window_start: int = Field(0, description="first analysed token of the text (specials excluded)")
    window_end: int = Field(0, description="one past the last analysed token of the text")
    artefact: str | None = Field(
        None, description="the Sparsefinder artefact used (null: sf-* methods are unavailable)"
    )
    own_alpha: list[list[float]] | None = Field(
        None,
        description="the model's own alpha per layer (rows) and head, when it was trained with "
        "entmax (an adapted model, a SparseModernBERT); null for a softmax-trained model. The "
        "analysis itself ran at `alpha`",
    )
    tokens: list[TokenOut]
    summary: list[HeadSummary]
    methods: list[MethodOut]
    thumbs: Thumbs | None = Field(None, description="every head's thumbnail (the head grid)")


# ----------------------------------------------------------------------------- one head


class Projections(BaseModel):
    queries: list[list[float]] = Field(description="projected queries q~ (n x r)")
    keys: list[list[float]] = Field(description="projected keys k~ (n x r)")


class RoutingMembers(BaseModel):
    queries: list[list[int]] = Field(description="per centroid c, the query tokens it chose")
    keys: list[list[int]]


class Packed(BaseModel):
    """A numeric array packed little-endian in base64 (sparse_core.methods.selection.b64_*)."""

    dtype: Literal["u8", "u16", "f32", "f64"]
    shape: list[int]
    data: str


class TopKOrders(BaseModel):
    k_max: int = Field(description="the largest k of the slider")
    order: Packed = Field(description="per query, its keys by true score, the first k_max")


class SpargeEstimates(BaseModel):
    qsim: list[float] = Field(description="per query block, its mean pairwise cosine")
    ksim: list[float] = Field(description="per key block, its mean pairwise cosine")
    u: Packed = Field(description="(T, T) pooled-score weights exp(z − max)")


class HeadCsr(BaseModel):
    """A head's edges as packed CSR (``?part=graph``), row-major: query i's edges are the
    ``counts[i]`` entries after those of queries 0 … i − 1."""

    counts: Packed = Field(description="edges of each query (n)")
    cols: Packed = Field(description="key j of every edge")
    p: Packed = Field(description="P_ij of every edge (f32, exact)")


class HeadPayload(BaseModel):
    """``GET /api/analyses/{id}/heads/{layer}/{head}``: all the page needs to redraw one head.

    The methods' fields below are typed one by one; a method whose ``payload_empty`` names a
    key not typed here (sparse_core.methods.base) has it carried as any JSON, and only such
    keys: another unknown key is refused."""

    model_config = ConfigDict(extra="allow")

    layer: int
    head: int
    n: int
    gold_sparsity: float | None = Field(
        None, description="the head's gold sparsity (absent with part=methods)"
    )
    edges: list[tuple[int, int, float]] = Field(
        default_factory=list, description="[i, j, p] for every p > 0 (empty with part=graph)"
    )
    csr: HeadCsr | None = Field(None, description="part=graph: the edges, packed")
    proj: Projections | None = Field(None, description="null without a Sparsefinder artefact")
    centroids: dict[str, list[list[float]]] = Field(default_factory=dict)
    reformer: dict[str, list[list[int]]] = Field(default_factory=dict)
    routing: dict[str, RoutingMembers] = Field(default_factory=dict)
    seed: int
    # today's learned selectors (definitions §12; sparse_core/methods/trained.py)
    indexer: TopKOrders | None = Field(
        None, description="lightning indexer: each query's keys by index score (null: none fitted)"
    )
    seer: dict[str, Packed] = Field(
        default_factory=dict,
        description="block size B -> each query block's key blocks by AttnGate score (T x T)",
    )
    # the arena (definitions §8; sparse_core/methods/*: head_payload, docs/methods.md)
    topk: TopKOrders | None = Field(None, description="oracle top-k: each query's key order")
    moba: dict[str, Packed] = Field(
        default_factory=dict, description="block size B -> each query's MoBA block order (n x T)"
    )
    quest: dict[str, Packed] = Field(
        default_factory=dict, description="page size B -> each query's Quest page order (n x T)"
    )
    xattention: dict[str, dict[str, Packed]] = Field(
        default_factory=dict, description="B -> stride S -> (T, T) block estimates"
    )
    sparge: dict[str, SpargeEstimates] = Field(default_factory=dict, description="B -> estimates")
    pos: list[str | None] | None = Field(
        None, description="each token's part of speech (absent with part=methods)"
    )
    lod: Lod | None = Field(None, description="the head's tile pyramid (see /tiles)")

    @model_validator(mode="after")
    def _only_method_keys(self) -> HeadPayload:
        keys = {k for m in METHODS.values() for k in m.payload_empty}
        unknown = sorted(set(self.model_extra or {}) - keys)
        if unknown:
            raise ValueError(f"no method's payload has the keys {unknown}")
        return self


class LodLevel(BaseModel):
    level: int
    factor: int = Field(description="tokens a side of one pooled cell: 2**level")
    side: int = Field(description="cells a side at this level: ceil(n / factor)")
    tiles: int = Field(description="tiles a side at this level")


class Lod(BaseModel):
    """The levels of one head's max-pooled pyramid (app/engine/lod.py)."""

    tile: int = Field(description="cells a side of one tile (256)")
    top: int = Field(description="the overview's level: one tile holds the whole head")
    levels: list[LodLevel]


class Tile(BaseModel):
    """``GET /api/analyses/{id}/heads/{layer}/{head}/tiles/{level}/{ti}/{tj}``: the non-zero
    cells of one tile of the head's max-pooled pyramid, columnar and row-major. A cell pools the
    factor x factor pairs (i, j) of its block; its p is their largest P_ij, so a cell is listed
    exactly when its block holds a gold edge (none is ever dropped)."""

    level: int
    factor: int
    ti: int
    tj: int
    n: int
    # pairs as two-item lists, not tuples: some JSON Schema validators (schemathesis' response
    # check among them) rewrite a tuple's ``prefixItems`` into an ``items`` array they refuse
    rows: list[int] = Field(
        min_length=2, max_length=2, description="tokens [first, end) of the tile's rows (queries)"
    )
    cols: list[int] = Field(
        min_length=2, max_length=2, description="tokens [first, end) of its columns (keys)"
    )
    cells: list[int] = Field(min_length=2, max_length=2, description="its cells: rows, columns")
    i: list[int] = Field(description="local cell row of every non-zero cell")
    j: list[int] = Field(description="local cell column")
    p: list[float] = Field(description="the block's largest probability (exact float32)")
    count: list[int] = Field(description="gold edges (P_ij > 0) in the block")


HeadPayload.model_rebuild()


# ----------------------------------------------------------------------------- pareto, metrics


class Metrics(BaseModel):
    recall: float
    sparsity: float
    exact: float
    precision: float
    mass_recall: float | None = Field(
        None,
        description="the attention mass the mask keeps, per query: sum of P over the kept "
        "edges / n (definitions §8; null in sums saved before it existed)",
    )
    block_sparsity: dict[Literal["16", "32", "64", "128"], float | None] = Field(
        default_factory=dict,
        description="tile size B -> share of the B x B tiles (ragged last ones included) that "
        "the valid region reaches and that hold no predicted pair: what a block-sparse kernel "
        "can skip (sparse_core.metrics.block_sparsity)",
    )


class HeadMetrics(Metrics):
    output_error: float | None = Field(
        None,
        description="what the mask's misses cost this head: ||(P~ - P) V||_F / ||P V||_F, P~ "
        "the head's entmax over the kept pairs only (a row with none: zeros); exactly 0 for "
        "a mask that keeps every pair of the graph (sparse_core.metrics.output_error)",
    )


class ParetoPoint(Metrics):
    method: str
    params: dict[str, Any]
    output_error: float | None = Field(
        None, description="with output_error=true: what the point's misses cost the head"
    )


class Pareto(BaseModel):
    scope: Literal["head", "mean"]
    layer: int | None = None
    head: int | None = None
    x: Literal["sparsity", "block"] = Field(
        "sparsity", description="the frontiers' x-axis: token sparsity or block sparsity"
    )
    block: int | None = Field(None, description="the tile size of x = block (else null)")
    gold_sparsity: float
    points: list[ParetoPoint]
    frontiers: dict[str, list[int]] = Field(description="per method, indices into points")


class ResultsHeads(BaseModel):
    layers: int
    heads: int


class ResultsLengths(BaseModel):
    """Each method's frontier read at fixed levels, one value per length (null: no point of
    the method reaches the level at that length)."""

    lengths: list[int] = Field(description="the lengths swept (tokens, specials included)")
    gold_sparsity: list[float] = Field(description="the gold sparsity at each length")
    sparsity_levels: list[float]
    recall_levels: list[float]
    recall_at_sparsity: dict[str, dict[str, list[float | None]]] = Field(
        description="method -> sparsity level -> the best recall at sparsity ≥ it, per length"
    )
    sparsity_at_recall: dict[str, dict[str, list[float | None]]] = Field(
        description="method -> recall level -> the highest sparsity at recall ≥ it, per length"
    )


class CorpusResults(BaseModel):
    """A `sparsescope pareto --out DIR` folder (pareto.json), served read only (--results)."""

    name: str = Field(description="the results folder's name")
    model: str
    alpha: float
    causal: bool | None = None
    texts: int = Field(description="how many corpus inputs were swept")
    gold_sparsity: float
    x: Literal["sparsity", "block"] = "sparsity"
    block: int | None = None
    points: list[ParetoPoint]
    frontiers: dict[str, list[int]] = Field(description="per method, indices into points")
    heads: ResultsHeads | None = Field(
        description="(layers, heads) of the per-head figures (pareto-heads.npz), null without"
    )
    lengths: ResultsLengths | None = Field(
        None,
        description="sparsity against length (pareto-lengths.json of `sparsescope pareto "
        "--lengths`), null without",
    )


class Distribution(BaseModel):
    mean: float | None
    q: list[float | None] = Field(description="the values at the body's quantiles")
    values: list[float] | None = Field(None, description="every query's value (one head)")


class HeadBudgets(BaseModel):
    layer: int
    head: int
    support: Distribution = Field(description="|G_i|, the true support of each query")
    k: dict[str, Distribution] = Field(description="level -> the least top-k recovering it")
    p: dict[str, Distribution] = Field(description="level -> the least top-p mass recovering it")


class PooledBudgets(BaseModel):
    support: Distribution
    k: dict[str, Distribution]
    p: dict[str, Distribution]


class Budgets(BaseModel):
    """Oracle budgets (definitions §8, sparse_core.budgets): ``scope`` "head" (one head, every
    query's values) or "all" (every head's quantiles and the pooled distribution)."""

    scope: Literal["head", "all"]
    levels: list[float] = Field(description="the recall levels (0.9, 0.99)")
    quantiles: list[float]
    n: int | None = None
    causal: bool | None = None
    layer: int | None = None
    head: int | None = None
    support: Distribution | None = None
    k: dict[str, Distribution] | None = None
    p: dict[str, Distribution] | None = None
    heads: list[HeadBudgets] | None = None
    pooled: PooledBudgets | None = None


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


RoleName = Literal[
    "sink", "previous", "next", "self", "delimiter", "syntactic", "local", "broad", "mixed"
]
RowRole = Literal["sink", "previous", "next", "self", "delimiter", "syntactic", "local", "broad"]


class HeadSyntax(BaseModel):
    """The dependency relation a head tracks best on this text (sparse_core/roles.py)."""

    relation: str = Field(description="spaCy's dependency label, e.g. det, nsubj, amod")
    direction: Literal["head", "dependent"] = Field(
        description="head: rows of words attached by the relation, hit when the top key is in "
        "their head word; dependent: rows of words with such a dependent, hit when it is in one"
    )
    accuracy: float = Field(description="share of those rows whose top key hits")
    rows: int = Field(description="how many rows (non-special tokens) the relation has")
    baseline: float = Field(
        description="the best fixed-offset guess on the same rows (always the token at i + offset)"
    )
    offset: int = Field(description="that offset (−3 … 3, not 0)")


class HeadRole(BaseModel):
    """One head's role on this text (definitions §11, sparse_core/roles.py)."""

    role: RoleName = Field(
        description="the largest share's role when that share is at least 0.5; below, broad when "
        "broad is the largest share, else mixed"
    )
    share: float = Field(description="the largest share (the fraction of rows of `leading`)")
    leading: RowRole = Field(description="the role of the largest share")
    shares: dict[RowRole, float] = Field(
        description="every role's fraction of the non-special rows (each row takes the first "
        "role that fits, in the order listed; rows that fit none count in no share)"
    )
    rows: int = Field(description="the non-special query rows counted")
    syntax: HeadSyntax | None = Field(
        description="the relation tracked best (with at least 3 rows), or null: no parse "
        "(spaCy not installed) or no relation with a hit"
    )


class Roles(BaseModel):
    """Every head's role: ``roles[layer][head]``."""

    roles: list[list[HeadRole]]


class Flow(BaseModel):
    """Information flow into one token (sparse_core/flow.py, docs/api.md "Information flow")."""

    token: int = Field(description="the target token's index")
    layer: int = Field(description="the target is the output of this layer")
    n: int
    layers: int
    reached: int = Field(description="how many input tokens have a path to the target")
    reachable: list[bool] = Field(
        description="per input token: a path to the target through the layers' graphs (union of "
        "heads, residual as a self-edge)"
    )
    mass: list[float] = Field(
        description="per input token: attention rollout mass (Abnar & Zuidema 2020; mean over "
        "heads + identity, row-normalised, multiplied through the layers); sums to 1; > 0 "
        "exactly where reachable (6 significant digits)"
    )
    counts: list[int] = Field(
        description="counts[k], k = 0 … layer + 1: positions of the stream entering layer k "
        "with a path to the target (counts[0] = reached, counts[layer + 1] = 1)"
    )
    levels: list[list[int]] = Field(
        description="levels[k]: the indices counted by counts[k] (levels[layer + 1] = [token])"
    )


# ----------------------------------------------------------------------------- share links

#: A share's text is at most this long (its state, as JSON, at most shares.MAX_STATE_BYTES).
MAX_TEXT_CHARS = 20_000
MAX_STR_CHARS = 200
KEY_PATTERN = r"^[A-Za-z][A-Za-z0-9_.-]{0,39}$"
Key = Annotated[str, StringConstraints(pattern=KEY_PATTERN)]
#: A map of short keys to scalars (a share's ``params``, the view's other keys): the schema
#: states every rule :func:`_scalar` and :data:`Key` apply, so no schema-valid map is refused.
KEYED = {"propertyNames": {"pattern": KEY_PATTERN}}


def _unicode(value: str) -> str:
    """Reject a lone UTF-16 surrogate (JSON's ``"\\ud800"``): it cannot be stored or served."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ValueError(
            f"strings must be valid Unicode; character {exc.start} is a lone surrogate"
        ) from None
    return value


def _scalar(value: Any) -> bool | int | float | str:
    """A slider value or view flag: true/false, a finite number or a short string."""
    if isinstance(value, bool | int):
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"numbers must be finite, got {value}")
        return value
    if isinstance(value, str):
        if len(value) > MAX_STR_CHARS:
            raise ValueError(f"strings are at most {MAX_STR_CHARS} characters, got {len(value)}")
        return _unicode(value)
    raise ValueError(
        f"a value must be true/false, a number or a short string, got {type(value).__name__}"
    )


_ScalarType = bool | int | float | str
#: :func:`_scalar`'s rules as JSON Schema (a JSON number is finite; a string at most
#: MAX_STR_CHARS characters)
SCALAR_SCHEMA = {
    "anyOf": [
        {"type": "boolean"},
        {"type": "number"},
        {"type": "string", "maxLength": MAX_STR_CHARS},
    ]
}
Scalar = Annotated[
    _ScalarType,
    PlainValidator(_scalar, json_schema_input_type=_ScalarType),
    WithJsonSchema(SCALAR_SCHEMA),
]


class _ViewExtras(ViewBase):
    """``ShareState.view``'s keys of no flag: a short scalar each."""

    model_config = ConfigDict(extra="allow", strict=True)
    __pydantic_extra__: dict[Key, Scalar]

    @classmethod
    def __get_pydantic_json_schema__(cls, core_schema: Any, handler: Any) -> Any:
        """Every key (flags and others) matches :data:`Key`, at most ``max_flags`` of them."""
        schema = super().__get_pydantic_json_schema__(core_schema, handler)
        target = handler.resolve_ref_schema(schema)
        target.update(KEYED, maxProperties=cls.max_flags)
        return schema


#: ``ShareState.view``: one typed field per display flag of the view's one definition.
ViewFlags = view_flags_model(_ViewExtras)


def _share_alpha(value: Any) -> float | str:
    """A saved view's alpha: a number in [1, 2] or "own" (the view's one definition)."""
    a = _alpha_in(value)
    if a is None or (isinstance(a, float) and not VIEW["alpha"].lo <= a <= VIEW["alpha"].hi):
        raise ValueError(
            f'must be a number in [1, 2] or "own" (the model\'s own alpha), got {value!r}'
        )
    return a


ShareAlpha = Annotated[
    float | Literal["own"],
    PlainValidator(_share_alpha, json_schema_input_type=float | Literal["own"]),
]


class ShareState(JsonBody):
    """Everything needed to reopen exactly one view of the page."""

    # strict: JSON types as declared (no "true" -> True, false -> 0, "1.5" -> 1.5)
    model_config = ConfigDict(extra="forbid", strict=True)

    text: str = Field(
        min_length=1, max_length=MAX_TEXT_CHARS, json_schema_extra=NOT_BLANK,
        description="the analysed text, as POST /api/analyze's text: not blank, some of its "
        "tokens in the model's vocabulary, at most the model's positions unless truncate (a "
        "400 naming state.text otherwise: the schema cannot know a vocabulary)",
    )  # fmt: skip
    # defaults and bounds: the view's one definition (sparse_core/view_schema.py)
    alpha: ShareAlpha = Field(
        VIEW["alpha"].default,
        description='entmax alpha in [1, 2], or "own" (the model\'s)',
        json_schema_extra=ALPHA_RANGE,
    )
    causal: bool = Field(False, description="decoder-style mask (j <= i)")
    truncate: bool = Field(False, description="analyse only a window of the model's positions")
    start: int = Field(
        0, ge=VIEW["start"].lo, le=VIEW["start"].hi,
        description="with truncate: the window's first token",
    )  # fmt: skip
    model: str | None = Field(
        None, max_length=VIEW["model"].max_len, json_schema_extra=served("model"),
        description="the model's id (null: the server's default model)",
    )  # fmt: skip
    layer: int | None = Field(
        0, ge=VIEW["layer"].lo, le=VIEW["layer"].hi, description="open layer (null: none chosen)"
    )
    head: int | None = Field(
        0, ge=VIEW["head"].lo, le=VIEW["head"].hi, description="open head (null: none chosen)"
    )
    method: MethodName = Field(VIEW["method"].default, description="the method whose mask is shown")
    params: dict[Key, Scalar] = Field(
        default_factory=dict,
        max_length=32,
        description="the method's slider values, add-ons (window, globals) included",
        json_schema_extra={**KEYED, "additionalProperties": False},
    )
    token: int | None = Field(
        None, ge=VIEW["lockedRow"].lo, le=VIEW["lockedRow"].hi,
        description="selected (locked) query row",
    )  # fmt: skip
    cluster: int | None = Field(
        None, ge=VIEW["cluster"].lo, le=VIEW["cluster"].hi,
        description="selected k-means cluster",
    )  # fmt: skip
    lecture_step: int | None = Field(None, ge=0, le=1000, description="lecture step, if any")
    view: ViewFlags = Field(
        default_factory=ViewFlags,
        description="display flags (sparse_core/view_schema.py), e.g. {hideSpecial: true, "
        "block: '64'}; other short keys are kept as they are",
    )

    @field_validator("text")
    @classmethod
    def _valid_unicode(cls, text: str) -> str:
        return _unicode(text)  # blank text: app/web/shares.py, with the analyser's 400


class ShareIn(BaseModel):
    """``POST /api/share``. ``state`` is checked by hand (size first, then :class:`ShareState`)."""

    model_config = ConfigDict(extra="forbid")

    state: Annotated[dict[str, Any], WithJsonSchema(inline_defs(ShareState.model_json_schema()))]


class ShareCreated(BaseModel):
    id: str = Field(description="12 URL-safe characters from secrets.token_urlsafe")
    url: str = Field(description="the page of this view: /s/{id}")
    embed: str = Field(description="a minimal view for an iframe: /embed/{id}")


class ShareOut(BaseModel):
    id: str
    state: ShareState
    created: str = Field(description="UTC creation time, ISO 8601")


# ----------------------------------------------------------------------------- the gallery


class Figure(BaseModel):
    """One measured number that justifies the example's choice of head."""

    label: str
    value: float | int | str


class Thumb(BaseModel):
    """A small picture of the head: ``m`` x ``m`` characters, row-major (see the build script):
    ``-`` exact zero, ``s`` predicted zero, ``1``-``f`` p > 0 on the √p ramp."""

    m: int = Field(ge=1, le=64)
    cells: str


class Example(BaseModel):
    """One curated example of static/gallery/examples.json (scripts/build_gallery.py)."""

    model_config = ConfigDict(extra="forbid")

    slug: str = Field(pattern=r"^[a-z0-9][a-z0-9-]{0,63}$")
    title: str
    summary: str
    explain: str = Field(description="what to look at, and why")
    how: str = Field(description="how the head was picked (measured with the real model)")
    state: ShareState
    figures: list[Figure] = Field(default_factory=list)
    tags: list[str] = Field(default_factory=list)
    credit: str | None = None
    needs_artefact: bool = False
    thumb: Thumb | None = None


class Gallery(BaseModel):
    """static/gallery/examples.json."""

    model_config = ConfigDict(extra="forbid")

    version: int
    model: str
    artefact: str | None = None
    built_by: str = ""
    examples: list[Example]


class ExampleOut(Example):
    url: str = Field(description="the main page opened on this example")
    analysis: str | None = Field(None, description="its analysis id once precomputed")
    ready: bool = Field(False, description="analysis, open head and Pareto sweep are cached")


class GalleryOut(BaseModel):
    """``GET /api/gallery``."""

    model: str = Field(description="the model the examples were measured on")
    artefact: str | None
    precomputed: bool = Field(description="every example has been precomputed")
    examples: list[ExampleOut]
