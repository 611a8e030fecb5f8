"""Vector fields on (S^{d-1})^n (and on R^d for the pure-attention family): the field base
classes, the one attention kernel every attention field is computed by, and one module per
variant."""
