"""One table of launcher rank variables (boundary.LAUNCHER_RANK_VARS), read identically by the launcher shim
(launchers.identity.launcher_identity) and the rank (rank.identity.rank_identity); only the order differs."""

import pytest

from envmatrix.boundary import LAUNCHER_RANK_VARS
from envmatrix.launchers.identity import LAUNCHER_FAMILY, launcher_identity
from envmatrix.rank.identity import rank_identity

SAMPLE = (5, 8, 1, 4, 1)  # rank, world, local rank, local size, node index
FIELDS = ("rank", "world", "local_rank", "local_size", "node")


def _env(family, pick=lambda names: names[0]):
    return {pick(names): str(v) for names, v in zip(LAUNCHER_RANK_VARS[family], SAMPLE) if names}


def _driver(ident):
    return tuple(getattr(ident, f) for f in FIELDS)


@pytest.mark.parametrize("family", list(LAUNCHER_RANK_VARS))
def test_every_family_resolves_the_same_on_both_sides(family):
    env = _env(family)
    ident = launcher_identity(env)
    assert ident.family == family and ident.source == env
    has = [bool(names) for names in LAUNCHER_RANK_VARS[family]]
    assert _driver(ident) == tuple(v if h else None for v, h in zip(SAMPLE, has))
    assert rank_identity(env) == (ident.rank, ident.world, ident.local_rank) == SAMPLE[:3]
    for launcher in [name for name, fam in LAUNCHER_FAMILY.items() if fam == family]:
        assert launcher_identity(env, launcher) == ident


FALLBACKS = [(family, field, name) for family, table in LAUNCHER_RANK_VARS.items()
             for field, names in zip(FIELDS, table) for name in names[1:]]


@pytest.mark.parametrize("family,field,name", FALLBACKS, ids=[f"{f}-{n}" for f, _, n in FALLBACKS])
def test_fallback_names_resolve_the_same_on_both_sides(family, field, name):
    env = _env(family)
    primary = LAUNCHER_RANK_VARS[family][FIELDS.index(field)][0]
    env[name] = env.pop(primary)
    ident = launcher_identity(env)
    assert ident.family == family and getattr(ident, field) == SAMPLE[FIELDS.index(field)]
    assert rank_identity(env) == (ident.rank, ident.world, ident.local_rank)


def test_rank_side_reads_torch_distributed_first_the_shim_its_launchers_own_family_first():
    env = {**_env("ompi"), "RANK": "0", "WORLD_SIZE": "2", "LOCAL_RANK": "0"}
    assert rank_identity(env) == (0, 2, 0)  # what the shim derived (RANK/...) is what torch.distributed uses
    assert launcher_identity(env).family == "ompi"  # torchrun's variables last: maybe only inherited
    assert launcher_identity(env, "torchrun").family == "torchrun"
    both = {**_env("ompi"), **{k: "0" for k in _env("slurm")}}
    assert launcher_identity(both, "srun").family == "slurm" and launcher_identity(both, "mpirun").family == "ompi"


def test_no_or_empty_variables_give_no_identity_on_either_side():
    for env in ({}, {"RANK": "", "WORLD_SIZE": ""}, {"SLURM_PROCID": "1"}):
        assert rank_identity(env) is None and launcher_identity(env) is None


@pytest.mark.parametrize("family", list(LAUNCHER_RANK_VARS))
def test_a_rank_variable_without_its_world_still_names_the_rank(family):
    from envmatrix.boundary import any_rank

    rank_name = LAUNCHER_RANK_VARS[family][0][0]
    assert rank_identity({rank_name: "3"}) is None and any_rank({rank_name: "3"}) == 3
    assert any_rank({}) is None
