"""The energy landscape on (S^{d-1})^n: Riemannian Hessians, critical points and their
classification, surveys of critical points, the circle, and symmetric configurations."""
