"""``envmatrix search``: Optuna (ask/tell) over a catalog-checked env space.

One module per concept: :mod:`space` (variables, values, pins, forbidden
combinations), :mod:`objective` (busbw terms -> one number per objective),
:mod:`study` (storage, samplers, the ask/tell loop, stale-trial recovery),
:mod:`export` (shell / setup YAML / NCCL tuner CSV) and :mod:`report`.
Nothing here imports optuna at import time; :mod:`study`, :mod:`report` and
:mod:`export` import it inside their functions.
"""
