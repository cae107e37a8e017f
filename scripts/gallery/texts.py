"""The texts of the gallery: fixed sentences, a code snippet, a periodic table built to the
tokenizer, and a Wikipedia passage read from WikiText-2 (copied into the JSON: the product never
reads the corpus at run time)."""

from __future__ import annotations

import re
from pathlib import Path

LECTURE = "The chef who ran to the store was out of food."

#: Winograd-style probes: (sentence, pronoun, antecedent). The coreference head is the one with
#: the highest mean P(pronoun -> antecedent) over all of them.
COREF_PROBES = (
    ("The animal didn't cross the street because it was too tired.", "it", "animal"),
    ("The animal didn't cross the street because it was too wide.", "it", "street"),
    ("The trophy didn't fit into the suitcase because it was too big.", "it", "trophy"),
    ("The trophy didn't fit into the suitcase because it was too small.", "it", "suitcase"),
    ("The city council refused the demonstrators a permit because they feared violence.",
     "they", "council"),
    ("The city council refused the demonstrators a permit because they advocated violence.",
     "they", "demonstrators"),
    ("Sarah lent her brother the car because he had to drive to work.", "he", "brother"),
    ("The dog chased the ball until it rolled under the old wooden fence.", "it", "ball"),
    ("My sister bought a new laptop, and she uses it every day.", "she", "sister"),
    ("The engineers fixed the bridge after they inspected it.", "they", "engineers"),
)  # fmt: skip

CODE = '''def top_scores(results, k=3):
    """Percent correct per name, best first."""
    scores = {name: round(100 * right / total, 1) for name, (right, total) in results.items()}
    ranked = sorted(scores.items(), key=lambda kv: kv[1], reverse=True)
    return dict(ranked[:k])


print(top_scores({"ada": (9, 10), "bob": (7, 10), "cy": (8, 10)}, k=2))
'''

ALPHA_TEXT = (
    "Kim gave her old bicycle to the neighbour's daughter, who rode it to school every morning."
)
POS_TEXT = (
    "She has been working all night, and they will have finished the report before the "
    "editors can read it. We were waiting while he was cooking, but nobody could have guessed "
    "what would happen next."
)
SF_TEXT = (
    "When the committee finally published its report, the minister who had ordered it refused "
    "to comment, but her deputy said that the findings would be studied carefully and that the "
    "department would answer every recommendation before the end of the year."
)
WIKI_ARTICLE = "Military history of Australia"
WIKI_CREDIT = (
    "Text: Wikipedia, “Military history of Australia”, from the WikiText-2 validation set "
    "(Merity et al. 2016), CC BY-SA 3.0. Sentences holding WikiText's <unk> placeholder are left "
    "out and the tokenisation spaces are undone."
)
PERIOD_COLOURS = "red green blue black white brown pink gold grey orange".split()
PERIOD_ITEMS = "apple pear plum lemon lime grape fig cherry peach mango".split()


def periodic_text(model) -> tuple[str, int]:
    """A table of 30 rows whose every row is the same number of tokens (the period)."""
    tok = model.tokenizer
    for w in PERIOD_COLOURS + PERIOD_ITEMS:
        if len(tok.encode(w, add_special_tokens=False).ids) != 1:
            raise RuntimeError(f"{w!r} is not a single token: the table would not be periodic")
    rows = [
        f"| {k % 10} | {PERIOD_COLOURS[k % 10]} | {PERIOD_ITEMS[(3 * k) % 10]} | {(7 * k) % 10} |"
        for k in range(30)
    ]
    text = "\n".join(rows)
    period = len(tok.encode(rows[0] + "\n", add_special_tokens=False).ids)
    ids = tok.encode(text, add_special_tokens=False).ids
    if len(ids) != period * len(rows):
        raise RuntimeError("the table's rows do not all have the same number of tokens")
    return text, period


def detokenize(s: str) -> str:
    """Undo WikiText's tokenisation spaces (``a @-@ b``, ``x , y``, ``( z )``, ``" q "``)."""
    s = s.replace(" @-@ ", "-").replace(" @,@ ", ",").replace(" @.@ ", ".")
    s = re.sub(r" ([,.;:!?%)\]])", r"\1", s)
    s = re.sub(r"([(\[$£]) ", r"\1", s)
    s = s.replace(" 's", "'s").replace(" n't", "n't").replace("s ' ", "s' ")
    s = re.sub(r'" (.*?) "', r'"\1"', s)
    return s.strip()


def wiki_passage(path: Path, model, max_tokens: int = 510) -> str:
    """The first ~``max_tokens`` tokens of the article's body: paragraphs in order, sentences
    holding ``<unk>`` left out, detokenised, paragraphs separated by a blank line."""
    lines = path.read_text(encoding="utf-8").split("\n")
    start = next(k for k, ln in enumerate(lines) if ln.strip() == f"= {WIKI_ARTICLE} =")
    text = ""
    for ln in lines[start + 1 :]:
        s = ln.strip()
        if re.match(r"^= [^=].* =$", s):
            break  # the next article
        if not s or s.startswith("="):
            continue
        sep = "\n\n" if text else ""
        for sent in re.split(r"(?<= \.) ", s):
            if "<unk>" in sent:
                continue
            cand = text + sep + detokenize(sent)
            if len(model.tokenizer.encode(cand).ids) > max_tokens:
                return text
            text, sep = cand, " "
    return text
