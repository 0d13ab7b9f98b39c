"""A search's confirm rounds: the top trials and the default env re-measured in interleaved rounds."""

from __future__ import annotations

from typing import Any, Callable, Optional


def confirm_winner(study: Any, space: Any, objectives: Any, evaluator: Any, settings: Any,
                   say: Callable[[str], None]) -> Optional[dict]:
    """Re-measure the top trials and the default env; the verdict (search.confirm.to_json) goes to the study and
    is returned (None: no trial to confirm)."""
    from envmatrix.env.atoms import Setup
    from envmatrix.search.confirm import CONFIRM_ATTR, DEFAULT, confirm, to_json
    from envmatrix.search.export import ranked

    top, seen = [], set()
    for t in ranked(study, objectives):
        key = tuple(sorted(t.params.items()))
        if key not in seen:
            seen.add(key)
            top.append(t)
    top = top[:settings.confirm_top_k]
    if not top:
        return None
    by_number = {t.number: t for t in top}
    labels = [t.number for t in top] + ([DEFAULT] if settings.baseline else [])
    sign = 1.0 if objectives[0].direction == "maximize" else -1.0

    def measure(rnd: int, label: Any) -> Any:
        name = "default" if label == DEFAULT else f"t{label:04d}"
        setup = Setup("default", (), origin="baseline") if label == DEFAULT else space.setup_of_params(by_number[label].params)
        out = evaluator.measure(f"confirm{rnd}_{name}", setup)
        return None if out.failed else out.values[0]

    say(f"confirm: re-measuring trials {', '.join(str(t.number) for t in top)}"
        f"{' and the default env' if settings.baseline else ''} in interleaved rounds")
    data = to_json(confirm(labels, measure, sign, settings.confirm_repeats, settings.confirm_max_repeats), sign)
    study.set_user_attr(CONFIRM_ATTR, data)
    return data
