// The page's view state, one definition: GENERATED from sparse_core/view_schema.py by
//     python -m sparse_core.view_schema --write
// Do not edit; edit VIEW_FIELDS there (tests/test_view_schema.py checks this file).
export const VIEW_SCHEMA = Object.freeze({
  "maxTextInUrl": 1500,
  "paramPrefix": "p.",
  "paramName": "^[A-Za-z][A-Za-z0-9_.-]{0,39}$",
  "paramHint": "a letter, then at most 39 of A-Z a-z 0-9 _ . -",
  "paramMaxChars": 200,
  "maxParams": 32,
  "shownChars": 40,
  "fields": [
    {"key": "text", "kind": "str", "default": "", "query": "text", "share": "text", "write": "text", "doc": "the analysed text (a long one: the analysis id, then a permanent link)"},
    {"key": "id", "kind": "str", "default": null, "query": "id", "share": null, "write": "never", "nullable": true, "state": false, "doc": "a cached analysis to reopen (a text too long for the address)"},
    {"key": "model", "kind": "str", "default": null, "query": "model", "share": "model", "write": "set", "maxLen": 300, "nullable": true, "doc": "the served model's id (null: the server's default)"},
    {"key": "alpha", "kind": "float", "default": 1.5, "query": "alpha", "share": "alpha", "write": "always", "values": ["own"], "lo": 1, "hi": 2, "doc": "entmax α: 1 softmax, 1.5 entmax, 2 sparsemax; own: the model's own α (one per head for a learned-α model)"},
    {"key": "causal", "kind": "bool", "default": false, "query": "causal", "share": "causal", "write": "changed", "doc": "decoder-style mask (j ≤ i)"},
    {"key": "truncate", "kind": "bool", "default": false, "query": null, "share": "truncate", "write": "never", "doc": "analyse a window of a text over the model's positions"},
    {"key": "start", "kind": "int", "default": 0, "query": "start", "share": "start", "write": "truncate", "lo": 0, "hi": 10000000, "doc": "the window's first token (a text over the model's positions); sets truncate"},
    {"key": "layer", "kind": "int", "default": 0, "query": "layer", "share": "layer", "write": "analysis", "lo": 0, "hi": 1023, "doc": "the open head's layer"},
    {"key": "head", "kind": "int", "default": 0, "query": "head", "share": "head", "write": "analysis", "lo": 0, "hi": 1023, "doc": "the open head"},
    {"key": "method", "kind": "str", "default": "window", "query": "method", "share": "method", "write": "always", "pattern": "^[a-z][a-z0-9-]{0,39}$", "hint": "a method name (a-z, 0-9 and -)", "doc": "the method whose mask is shown"},
    {"key": "params", "kind": "params", "default": {}, "query": "p.", "share": "params", "write": "always", "doc": "the method's slider values, add-ons included: p.<name>=<value>"},
    {"key": "lockedRow", "kind": "int", "default": null, "query": "row", "share": "token", "write": "changed", "lo": 0, "hi": 100000, "nullable": true, "doc": "the locked query row (the selection)"},
    {"key": "cluster", "kind": "int", "default": null, "query": "cluster", "share": "cluster", "write": "changed", "lo": 0, "hi": 100000, "nullable": true, "doc": "the selected k-means cluster (POS panel)"},
    {"key": "scope", "kind": "enum", "default": "head", "query": "scope", "share": "view.scope", "write": "changed", "values": ["head", "mean"], "doc": "the Pareto plot: the open head or the mean of heads"},
    {"key": "gridColour", "kind": "enum", "default": "gold", "query": "grid", "share": "view.grid", "write": "changed", "values": ["gold", "recall"], "doc": "the head grid's colour: gold sparsity or recall"},
    {"key": "hideSpecial", "kind": "bool", "default": false, "query": "hide", "share": "view.hideSpecial", "write": "changed", "doc": "hide [CLS]/[SEP] rows and columns"},
    {"key": "block", "kind": "enum", "default": "128", "query": "block", "share": "view.block", "write": "changed", "values": ["16", "32", "64", "128"], "doc": "tile size B of the block sparsity shown (sparse_core.metrics.BLOCKS)"},
    {"key": "paretoX", "kind": "enum", "default": "sparsity", "query": "px", "share": "view.paretoX", "write": "changed", "values": ["sparsity", "block"], "doc": "the Pareto plot's x: token sparsity or block sparsity at B"},
    {"key": "zoom", "kind": "str", "default": "", "query": "zoom", "share": "view.zoom", "write": "changed", "maxLen": 40, "pattern": "^$|^[0-9]{1,3}(\\.[0-9]{1,2})?@[0-9]{1,6}(\\.[0-9]{1,2})?,[0-9]{1,6}(\\.[0-9]{1,2})?$", "hint": "z@row,column (the zoom, then the first row and column in view), or empty", "doc": "the heatmap's zoom and pan (frontend/js/heatmap-focus.js)"},
    {"key": "view", "kind": "enum", "default": "head", "query": "view", "share": "view.view", "write": "changed", "values": ["head", "model"], "doc": "one head (the heatmap) or the whole model: every head at once (frontend/js/model-view.js)"},
  ],
});
