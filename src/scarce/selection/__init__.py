"""Ruler selection without ground truth: separation metrics, group aggregation, validation.

The paper's selector (section "Ruler selection", appendix ``app:llm-ranking``) is the worst-turn
directional divergence ``S(G) = min_t KL(p_good,t || p_bad,t)`` of a ruler's score
distributions:

    from scarce.selection import aggregate_groups
    s = aggregate_groups({turn: (good_scores, bad_scores) for ...}, "kl_good_bad", how="worst")

Pure numpy/scipy (no scikit-learn import).
"""

from scarce.selection.aggregation import AGGREGATIONS, aggregate, aggregate_groups, metric_by_group
from scarce.selection.bias import leakage_masses, leakage_relative_bias
from scarce.selection.density import GridDensities, knn_kl_divergence, shared_grid_densities
from scarce.selection.metrics import (
    MetricSpec,
    auc,
    available_metrics,
    cohens_d,
    compute_metric,
    compute_metrics,
    metric_spec,
)
from scarce.selection.ranking import (
    bootstrap_interval,
    leave_one_out_min,
    permutation_pvalue,
    spearman,
    spearman_asymptotic_pvalue,
)
from scarce.selection.validation import (
    FamilyRanking,
    SelectorValidation,
    family_ranking,
    group_scores,
    metric_values,
    selector_robustness,
    selector_values,
    validate_selector,
)

__all__ = [
    "AGGREGATIONS",
    "FamilyRanking",
    "GridDensities",
    "MetricSpec",
    "SelectorValidation",
    "aggregate",
    "aggregate_groups",
    "auc",
    "available_metrics",
    "bootstrap_interval",
    "cohens_d",
    "compute_metric",
    "compute_metrics",
    "family_ranking",
    "group_scores",
    "knn_kl_divergence",
    "leakage_masses",
    "leakage_relative_bias",
    "leave_one_out_min",
    "metric_by_group",
    "metric_spec",
    "metric_values",
    "permutation_pvalue",
    "selector_robustness",
    "selector_values",
    "shared_grid_densities",
    "spearman",
    "spearman_asymptotic_pvalue",
    "validate_selector",
]
