"""A cost-aware γ schedule priced by the loop itself.

`cost_aware_in_loop` runs the loop it will steer: one autoregressive run and one greedy run at
each fixed γ, on the learner's own prompt, and hands them to `CostAwareGamma.from_runs`. It sits
apart from `schedules` because it runs the loops, and the loops import the schedules.
"""

from ..core.args import check_int
from .autoregressive import autoregressive
from .schedules import CostAwareGamma
from .speculative import speculative


def cost_aware_in_loop(target, drafter, ids, *, gammas=(1, 2, 3, 4), max_new_tokens: int = 24,
                       **kwargs) -> CostAwareGamma:
    """A `CostAwareGamma` whose t(γ+1)/t(1) and ĉ are what `drafter` and `target` paid on `ids`
    (greedy, `max_new_tokens` each) at each γ of `gammas`; `kwargs` go to `CostAwareGamma`."""
    gammas = sorted({check_int("each of gammas", g, 1) for g in gammas})
    if not gammas:
        raise ValueError("gammas must hold at least one γ >= 1")
    check_int("max_new_tokens", max_new_tokens, 1)
    plain = autoregressive(target, ids, max_new_tokens=max_new_tokens)
    runs = {g: speculative(target, drafter, ids, gamma=g, max_new_tokens=max_new_tokens)
            for g in gammas}
    return CostAwareGamma.from_runs(plain, runs, **kwargs)
