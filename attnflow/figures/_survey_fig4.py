"""The mean curves of the survey's Fig. 4, read off the published image (data, not code).

Source: P. Rigollet, *The Mean-Field Dynamics of Transformers*, arXiv:2512.01868 (ICM 2026),
Fig. 4 (``fig:norm``, §6.2), reproduced there from Karagodin, Ge, Polyanskiy, Rigollet,
arXiv:2510.22026; its file name ``exp2_kaiming_h1_T10_midtemp``. The numbers are the mean
cosine similarity of each solid curve, digitised from the published PNG (reading error about
±0.02; the shaded 90% bands are about ±0.05 wide where a curve rises steeply and narrower
elsewhere). Values printed as "≈0" in the digitisation are stored as 0.0.

``STYLE`` is the published figure's legend order and colours (matplotlib's default cycle
as the published image shows it).
"""

TIMES = (0.5, 1.0, 1.5, 2.0, 2.5, 3.0, 3.5, 4.0, 5.0, 6.0, 7.0, 8.0, 10.0)

MEANS = {
    "Post-LN": (0.0, 0.02, 0.04, 0.12, 0.27, 0.50, 0.74, 0.89, 0.99, 1.00, 1.00, 1.00, 1.00),
    "Pre-LN": (0.0, 0.02, 0.04, 0.11, 0.24, 0.42, 0.59, 0.72, 0.87, 0.93, 0.96, 0.97, 0.98),
    "Peri-LN": (0.14, 0.41, 0.62, 0.75, 0.83, 0.88, 0.91, 0.93, 0.95, 0.97, 0.98, 0.99, 0.99),
    "Mix-LN": (0.0, 0.02, 0.04, 0.12, 0.27, 0.48, 0.67, 0.79, 0.91, 0.95, 0.97, 0.98, 0.99),
    "nGPT": (0.15, 0.47, 0.74, 0.89, 0.95, 0.98, 0.99, 1.00, 1.00, 1.00, 1.00, 1.00, 1.00),
    "sqrt-scaling": (0.0, 0.01, 0.02, 0.04, 0.07, 0.12, 0.19, 0.27, 0.47, 0.67, 0.81, 0.90, 0.97),
}

# Legend order and colour of the published figure.
STYLE = (
    ("Post-LN", "tab:blue"),
    ("Pre-LN", "tab:orange"),
    ("Peri-LN", "tab:green"),
    ("Mix-LN", "tab:purple"),
    ("nGPT", "tab:red"),
    ("sqrt-scaling", "tab:brown"),
)

SOURCE = "Rigollet, arXiv:2512.01868, Fig. 4 (from arXiv:2510.22026), digitised means"
