"""What each method is, its parameters and where it comes from: the text of ``/docs``.

Kept next to the methods and checked by the tests against every method's ``from_params``
(each documented parameter is accepted, each accepted one documented), so the docs cannot
drift from the code. docs/methods.md says the same in prose.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from app.calibration.methods.candidates import CATALOGUE, DEFAULT_CANDIDATES


@dataclass(frozen=True)
class MethodDoc:
    summary: str
    source: str
    params: dict[str, str] = field(default_factory=dict)
    scores: str = "vector or n x k matrix (one-vs-rest)"


_BOUND = {
    "bound": '"none" (default) or "laplace": outputs clipped into [1/(n+2), (n+1)/(n+2)] '
    "(k classes: each probability raised to 1/(n+k), rows renormalised, none below "
    "1/(n+2k)), n the effective batch size; what auto uses",
}

_TRIM = {
    "trim": '"none" (default), "trainset" or "cv": drop the most extreme scores (Rüping)',
    "trim_tau_min": "smallest kept fraction tau of the grid, in (0, 1]; default 0.9",
    "trim_grid": "number of tau values in [trim_tau_min, 1], 11..101; default 11",
    "trim_center": "the centre c that distances are measured from; default 0.5 when all "
    "scores lie in [0, 1], else 0",
    "trim_loss": '"brier" (default) or "log_loss": how a tau is scored',
    "trim_folds": 'folds of trim="cv", 2..20; default 10',
}

METHOD_DOCS: dict[str, MethodDoc] = {
    "platt": MethodDoc(
        "p = 1 / (1 + exp(A f + B)), fitted by Newton's method with backtracking",
        "Platt (1999); Lin, Lin & Weng (2007); Niculescu-Mizil & Caruana (2005)",
        {
            "targets": '"platt" (smoothed targets, default) or "hard" (0/1)',
            "max_iter": "Newton iterations at most, 1..10000; default 100",
            **_TRIM,
            **_BOUND,
        },
    ),
    "isotonic": MethodDoc(
        "non-decreasing step function by pair-adjacent violators, tied scores pooled",
        "Ayer et al. (1955); Zadrozny & Elkan (2002); Niculescu-Mizil & Caruana (2005)",
        {
            "interpolation": '"linear" (default, as scikit-learn) or "step" between thresholds',
            **_TRIM,
            **_BOUND,
        },
    ),
    "logistic_correction": MethodDoc(
        "p = 1 / (1 + exp(-2F)) for boosting margins F; nothing is fitted",
        "Friedman, Hastie & Tibshirani (2000); Niculescu-Mizil & Caruana, boosting (2005)",
        scores="vector",
    ),
    "beta": MethodDoc(
        "p = 1 / (1 + 1 / (e^c f^a / (1 - f)^b)), a, b >= 0; scores strictly in (0, 1)",
        "Kull, Silva Filho & Flach (2017)",
        _BOUND,
    ),
    "histogram_binning": MethodDoc(
        "equal-frequency bins, each mapped to its fraction of positives",
        "Zadrozny & Elkan (2001)",
        {
            "n_bins": 'bins, 2..1000, or "cv" to choose among 5..50; default 10',
            "smoothing": '"none" (default) or "laplace": (positives + 1) / (count + 2)',
            **_BOUND,
        },
    ),
    "minmax": MethodDoc(
        "(f - min) / (max - min), clipped to [0, 1]: the baseline for SVM margins",
        "Niculescu-Mizil & Caruana (2005)",
        scores="vector",
    ),
    "venn_abers": MethodDoc(
        "Venn-ABERS: p0 and p1, the isotonic fits of the batch plus the score labelled 0 and "
        "1, answered as p = p1 / (1 - p0 + p1); `intervals` gives [p0, p1]. Never 0 or 1",
        "Vovk & Petej (2014); Vovk, Petej & Fedorova (2015)",
        {
            "mode": '"inductive" (IVAP on the whole batch, default) or "cross" (CVAP: one '
            "IVAP per fold, merged by geometric means)",
            "folds": 'folds of mode "cross", 2..20; default 5',
        },
        scores="vector or n x k matrix (one-vs-rest); the exact fit is a sequential sweep, "
        "about 1.3-1.75 us per distinct score (1.3 s at 10^6, plus its cross-validation)",
    ),
    "temperature": MethodDoc(
        "softmax(z / T) of logits (probability rows are turned into log-probabilities)",
        "Guo et al. (2017)",
        _BOUND,
        scores="n x k matrix",
    ),
    "bostrom": MethodDoc(
        "top class p + r (1 - p), others p (1 - r); r minimises the Brier score",
        "Boström (2008), Calibrating Random Forests",
        {
            "r": '"sigmoid" (r a non-decreasing sigmoid of the top probability, default) or '
            '"constant"',
            **_BOUND,
        },
        scores="n x k matrix of probabilities",
    ),
    "auto": MethodDoc(
        "the candidate with the lowest k-fold cross-validated log loss, refitted on the whole "
        "batch; a more complex candidate must win by half a paired standard error. Every "
        "candidate is bounded (never exactly 0 or 1). Default candidates: "
        + ", ".join(
            f"{c.label} ({c.fallback} past {c.max_distinct} distinct scores)"
            if c.fallback
            else c.label
            for c in CATALOGUE
            if c.label in DEFAULT_CANDIDATES
        )
        + ", each where it fits the batch. Every candidate's CV log loss and standard error "
        "are recorded",
        "Niculescu-Mizil & Caruana (2005), learning curves; make bench-quality",
        {
            "cv": "folds, 2..20; default 5",
            "candidates": "names to try instead of the defaults, from: "
            + ", ".join(c.label for c in CATALOGUE),
        },
    ),
}


def params_markdown() -> str:
    """The parameters of every method as a markdown table, for the OpenAPI description."""
    rows = ["| method | scores | parameters | source |", "|---|---|---|---|"]
    for method, doc in METHOD_DOCS.items():
        params = "<br>".join(f"`{k}`: {v}" for k, v in doc.params.items()) or "none"
        rows.append(f"| `{method}`: {doc.summary} | {doc.scores} | {params} | {doc.source} |")
    return "\n".join(rows)
