"""parse_env_file / format_env_file: seed 003's export blocks, shell subset, rejections, round trip."""

from __future__ import annotations

import re
import shutil
import subprocess

import pytest

from envmatrix.bisect.envfile import format_env_file, parse_env_file
from envmatrix.env.atoms import Atom, Setup
from envmatrix.env.merge import materialize
from envmatrix.errors import ConfigError

# Seed 003 blocks (0)..(3), pasted verbatim from shared/seeds/003_9629929eeb9e642e.txt. Block (0) stands again, on
# purpose, in test_bisect_e2e.py (with a gloo culprit, its counts asserted) and benchmarks/h200_bisect/seed003_env0.sh
# (a GPU record's input): each must read as the user's paste on its own.
BLOCK_0 = """\
export NCCL_NET_GDR_LEVEL=PHB
export NCCL_CROSS_NIC=1
export NCCL_COLLNET_ENABLE=1
export NCCL_NET="AWS Libfabric"
export LD_LIBRARY_PATH=/soft/libraries/aws-ofi-nccl/v1.9.1-aws/lib:$LD_LIBRARY_PATH
export LD_LIBRARY_PATH=/soft/libraries/hwloc/lib/:$LD_LIBRARY_PATH
export FI_CXI_DISABLE_HOST_REGISTER=1
export FI_MR_CACHE_MONITOR=userfaultfd
export FI_CXI_DEFAULT_CQ_SIZE=131072
"""

BLOCK_1 = """\
export NCCL_NET_GDR_LEVEL=PHB
export NCCL_CROSS_NIC=1
export NCCL_COLLNET_ENABLE=1
export NCCL_NET="AWS Libfabric"
export LD_LIBRARY_PATH=/soft/libraries/aws-ofi-nccl/v1.9.1-aws/lib:$LD_LIBRARY_PATH
export LD_LIBRARY_PATH=/soft/libraries/hwloc/lib/:$LD_LIBRARY_PATH
"""

BLOCK_2 = """\
export NCCL_NET="AWS Libfabric"
export LD_LIBRARY_PATH=/soft/libraries/aws-ofi-nccl/v1.9.1-aws/lib:$LD_LIBRARY_PATH
export LD_LIBRARY_PATH=/soft/libraries/hwloc/lib/:$LD_LIBRARY_PATH
export FI_CXI_DISABLE_HOST_REGISTER=1
export FI_MR_CACHE_MONITOR=userfaultfd
export FI_CXI_DEFAULT_CQ_SIZE=131072
"""

BLOCK_3 = """\
export NCCL_NET="AWS Libfabric"
export LD_LIBRARY_PATH=/soft/libraries/aws-ofi-nccl/v1.9.1-aws/lib:$LD_LIBRARY_PATH
export LD_LIBRARY_PATH=/soft/libraries/hwloc/lib/:$LD_LIBRARY_PATH
"""

GDR = Atom("NCCL_NET_GDR_LEVEL", "set", "PHB")
CROSS = Atom("NCCL_CROSS_NIC", "set", "1")
COLLNET = Atom("NCCL_COLLNET_ENABLE", "set", "1")
NET = Atom("NCCL_NET", "set", "AWS Libfabric")
HWLOC = Atom("LD_LIBRARY_PATH", "prepend", "/soft/libraries/hwloc/lib/")
OFI = Atom("LD_LIBRARY_PATH", "prepend", "/soft/libraries/aws-ofi-nccl/v1.9.1-aws/lib")
FI = (
    Atom("FI_CXI_DISABLE_HOST_REGISTER", "set", "1"),
    Atom("FI_MR_CACHE_MONITOR", "set", "userfaultfd"),
    Atom("FI_CXI_DEFAULT_CQ_SIZE", "set", "131072"),
)

SEED_BLOCKS = {
    "0": (BLOCK_0, (GDR, CROSS, COLLNET, NET, HWLOC, OFI, *FI)),
    "1": (BLOCK_1, (GDR, CROSS, COLLNET, NET, HWLOC, OFI)),
    "2": (BLOCK_2, (NET, HWLOC, OFI, *FI)),
    "3": (BLOCK_3, (NET, HWLOC, OFI)),
}

ALLOWED = "allowed: KEY=VALUE lines, export/unset, quotes, comments and $VAR references"


@pytest.mark.parametrize("name", sorted(SEED_BLOCKS))
def test_seed_003_blocks_give_exact_atoms(name):
    text, expected = SEED_BLOCKS[name]
    assert parse_env_file(text, {"LD_LIBRARY_PATH": "/usr/lib64"}) == expected
    # the inherited value never leaks into the atoms
    assert parse_env_file(text, {}) == expected


def test_seed_003_materializes_like_the_shell():
    atoms = parse_env_file(BLOCK_3, {})
    env = materialize({"LD_LIBRARY_PATH": "/usr/lib64", "HOME": "/h"}, atoms)
    assert env == {
        "HOME": "/h",
        "NCCL_NET": "AWS Libfabric",
        "LD_LIBRARY_PATH": "/soft/libraries/hwloc/lib/:/soft/libraries/aws-ofi-nccl/v1.9.1-aws/lib:/usr/lib64",
    }


SEVERAL_ON_A_LINE = [
    "A=0\nexport A=1 B=$A C='x y' # B reads A from before the line, as bash expands export's words first",
    "A=0\nA=1 B=$A", # bare assignments run left to right
    "export LD_LIBRARY_PATH=/a:$LD_LIBRARY_PATH NCCL_NET=IB\nexport LD_LIBRARY_PATH=$LD_LIBRARY_PATH:/z NCCL_DEBUG",
    "export NCCL_DEBUG=INFO\texport_ME=2",
]


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
@pytest.mark.parametrize("text", SEVERAL_ON_A_LINE)
def test_several_assignments_on_a_line_agree_with_bash(text):
    base = {"PATH": "/usr/bin:/bin", "LD_LIBRARY_PATH": "/usr/lib64"}
    out = subprocess.run(["bash", "-c", "set -a\n" + text + "\nenv -0"], env=base, capture_output=True, check=True).stdout.decode()
    shell_env = {k: v for k, v in (kv.split("=", 1) for kv in out.split("\0") if kv) if k not in {"SHLVL", "PWD", "OLDPWD", "_"}}
    assert materialize(base, parse_env_file(text, base)) == shell_env


def test_export_line_with_several_assignments_gives_their_atoms():
    text = "export LD_LIBRARY_PATH=/a:$LD_LIBRARY_PATH NCCL_NET=IB NCCL_DEBUG\nNCCL_ALGO=Ring NCCL_PROTO=$NCCL_ALGO"
    assert parse_env_file(text, {}) == (
        Atom("LD_LIBRARY_PATH", "prepend", "/a"),
        Atom("NCCL_NET", "set", "IB"),
        Atom("NCCL_ALGO", "set", "Ring"),
        Atom("NCCL_PROTO", "set", "Ring"),
    )


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
@pytest.mark.parametrize("name", sorted(SEED_BLOCKS))
def test_seed_003_blocks_agree_with_bash(name):
    text, _ = SEED_BLOCKS[name]
    base = {"PATH": "/usr/bin:/bin", "LD_LIBRARY_PATH": "/usr/lib64"}
    out = subprocess.run(
        ["bash", "-c", text + "\nenv -0"], env=base, capture_output=True, check=True
    ).stdout.decode()
    shell_env = dict(kv.split("=", 1) for kv in out.split("\0") if kv)
    ours = materialize(base, parse_env_file(text, base))
    for key in ours:
        assert shell_env[key] == ours[key], key


def test_round_trip_of_seed_blocks():
    for text, expected in SEED_BLOCKS.values():
        formatted = format_env_file(expected)
        assert parse_env_file(formatted, {"LD_LIBRARY_PATH": "/x"}) == expected
    assert format_env_file(SEED_BLOCKS["3"][1]) == (
        "export NCCL_NET='AWS Libfabric'\n"
        "export LD_LIBRARY_PATH=/soft/libraries/aws-ofi-nccl/v1.9.1-aws/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}\n"
        "export LD_LIBRARY_PATH=/soft/libraries/hwloc/lib/${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}\n"
    )


@pytest.mark.parametrize("inherited", [{}, {"P": ""}, {"P": "/base", "Q": "/q"}])
def test_written_lines_give_in_bash_the_env_the_run_had(inherited):
    # "X:$P" with P unset or empty leaves "X:", and an empty entry of a path list is the current directory, which the
    # run (env/merge.py) never had: the lines add the ':' only where the variable holds something
    atoms = (Atom("P", "prepend", "/a b"), Atom("P", "prepend", "/c"), Atom("Q", "append", "/y"), Atom("N", "set", "1"))
    text = format_env_file(atoms)
    shown = subprocess.run(["bash", "-c", text + 'printf "%s|%s" "$P" "$Q"'], env=inherited, capture_output=True,
                           text=True, check=True).stdout
    env = materialize(inherited, atoms)
    assert shown == f"{env.get('P', '')}|{env.get('Q', '')}" and not shown.startswith(":") and ":|" not in shown
    assert parse_env_file(text, inherited) == atoms  # and the lines read back as the same atoms
    assert Setup("s", atoms).shell_lines() == text.splitlines()  # bisect's and export's lines: the same renderer


def test_round_trip_of_awkward_values():
    atoms = (
        Atom("A", "set", "it's \"quoted\" $HOME `x` \\ # not a comment"),
        Atom("EMPTY", "set", ""),
        Atom("GONE", "unset"),
        Atom("P", "set", "/base"),
        Atom("P", "prepend", "/a b"),
        Atom("P", "prepend", "/c"),
        Atom("P", "append", "/z$"),
        Atom("P", "append", "/y"),
        Atom("LD_PRELOAD", "prepend", "/opt/libnccl.so.2"),
    )
    text = format_env_file(atoms)
    assert parse_env_file(text, {"HOME": "/h", "P": "/old", "GONE": "1"}) == atoms
    assert materialize({"P": "/old"}, parse_env_file(text, {}))["P"] == "/a b:/c:/base:/z$:/y"


def test_format_rejects_path_entry_with_colon():
    with pytest.raises(ConfigError, match=r"path entry '/a:/b' contains ':'; allowed"):
        format_env_file((Atom("LD_LIBRARY_PATH", "prepend", "/a:/b"),))


def test_quoting_escapes_and_comments():
    text = r"""
# full-line comment
   # indented comment

A='single $HOME "x" \n'   # trailing comment
export B="double \"q\" \\ \$HOME $HOME ${HOME}/x \n # kept"
C=plain#notcomment
D=esc\ aped\$X
E=
F="" # empty
G=a'b c'"d"$HOME
H=$ # lone dollar
"""
    atoms = parse_env_file(text, {"HOME": "/home/u"})
    assert atoms == (
        Atom("A", "set", 'single $HOME "x" \\n'),
        Atom("B", "set", 'double "q" \\ $HOME /home/u /home/u/x \\n # kept'),
        Atom("C", "set", "plain#notcomment"),
        Atom("D", "set", "esc aped$X"),
        Atom("E", "set", ""),
        Atom("F", "set", ""),
        Atom("G", "set", "ab cd/home/u"),
        Atom("H", "set", "$"),
    )


def test_expansion_uses_inherited_then_earlier_lines():
    text = """\
export ROOT=/opt/nccl
export NCCL_HOME=$ROOT/build
export LD_LIBRARY_PATH=${NCCL_HOME}/lib:$LD_LIBRARY_PATH
export PLUGIN="$PREFIX/ofi"
export MISSING=x${NOPE}y
export COPY=$LD_LIBRARY_PATH
"""
    atoms = parse_env_file(text, {"PREFIX": "/soft", "LD_LIBRARY_PATH": "/usr/lib"})
    assert atoms == (
        Atom("ROOT", "set", "/opt/nccl"),
        Atom("NCCL_HOME", "set", "/opt/nccl/build"),
        Atom("LD_LIBRARY_PATH", "prepend", "/opt/nccl/build/lib"),
        Atom("PLUGIN", "set", "/soft/ofi"),
        Atom("MISSING", "set", "xy"),
        Atom("COPY", "set", "/opt/nccl/build/lib:/usr/lib"),
    )


def test_path_prepend_append_accumulate_and_plain_set_replaces():
    text = """\
export LD_LIBRARY_PATH=/a:/b:$LD_LIBRARY_PATH
export LD_LIBRARY_PATH="/c:${LD_LIBRARY_PATH}"
export LD_LIBRARY_PATH=$LD_LIBRARY_PATH:/y
export LD_LIBRARY_PATH=$LD_LIBRARY_PATH:/z1:/z2
export LD_PRELOAD=/p.so:$LD_PRELOAD
export LD_PRELOAD=/only.so
"""
    atoms = parse_env_file(text, {"LD_LIBRARY_PATH": "/usr/lib"})
    assert atoms == (
        Atom("LD_LIBRARY_PATH", "prepend", "/c"),
        Atom("LD_LIBRARY_PATH", "prepend", "/a"),
        Atom("LD_LIBRARY_PATH", "prepend", "/b"),
        Atom("LD_LIBRARY_PATH", "append", "/y"),
        Atom("LD_LIBRARY_PATH", "append", "/z1"),
        Atom("LD_LIBRARY_PATH", "append", "/z2"),
        Atom("LD_PRELOAD", "set", "/only.so"),
    )
    env = materialize({"LD_LIBRARY_PATH": "/usr/lib"}, atoms)
    assert env["LD_LIBRARY_PATH"] == "/c:/a:/b:/usr/lib:/y:/z1:/z2"


def test_plain_set_after_path_atoms_is_one_set_atom_with_expanded_value():
    text = """\
export LD_LIBRARY_PATH=/a:$LD_LIBRARY_PATH
export LD_LIBRARY_PATH=/front:$LD_LIBRARY_PATH:/back
"""
    atoms = parse_env_file(text, {"LD_LIBRARY_PATH": "/usr/lib"})
    assert atoms == (Atom("LD_LIBRARY_PATH", "set", "/front:/a:/usr/lib:/back"),)


def test_path_after_set_and_unset_keeps_base_atom():
    text = """\
export CUDA_LIBS=/cuda/lib:/cuda/lib64
export LD_LIBRARY_PATH=/base
export LD_LIBRARY_PATH=$CUDA_LIBS:$LD_LIBRARY_PATH
unset LD_PRELOAD
export LD_PRELOAD=/x.so:$LD_PRELOAD
"""
    atoms = parse_env_file(text, {"LD_PRELOAD": "/old.so"})
    assert atoms == (
        Atom("CUDA_LIBS", "set", "/cuda/lib:/cuda/lib64"),
        Atom("LD_LIBRARY_PATH", "set", "/base"),
        # an expanded entry holding ':' still gives one atom per path entry
        Atom("LD_LIBRARY_PATH", "prepend", "/cuda/lib"),
        Atom("LD_LIBRARY_PATH", "prepend", "/cuda/lib64"),
        Atom("LD_PRELOAD", "unset"),
        Atom("LD_PRELOAD", "prepend", "/x.so"),
    )
    env = materialize({"LD_PRELOAD": "/old.so"}, atoms)
    assert env["LD_LIBRARY_PATH"] == "/cuda/lib:/cuda/lib64:/base"
    assert env["LD_PRELOAD"] == "/x.so"


def test_unset_and_reassignment():
    text = """\
export NCCL_DEBUG=INFO
unset NCCL_DEBUG NCCL_ALGO  # two names
X=$NCCL_DEBUG-$NCCL_PROTO
export NCCL_ALGO=Ring
export NCCL_ALGO=Tree
export NCCL_PROTO
"""
    atoms = parse_env_file(text, {"NCCL_PROTO": "Simple"})
    assert atoms == (
        Atom("NCCL_DEBUG", "unset"),
        Atom("NCCL_ALGO", "set", "Tree"),
        Atom("X", "set", "-Simple"),
    )


REJECTED = [
    ("A=$(hostname)", r"command substitution \$\(\.\.\.\)"),
    ('A="$(hostname)"', r"command substitution \$\(\.\.\.\)"),
    ("A=`hostname`", "backticks"),
    ('A="x`id`"', "backticks"),
    ("source /etc/profile", "sourcing another file"),
    (". ./env.sh", "sourcing another file"),
    ("if [ -d /soft ]; then", "control flow"),
    ("fi", "control flow"),
    ("for x in 1 2; do", "control flow"),
    ("export A=1 \\", "line continuation"),
    ("A=one\\", "line continuation"),
    ("unset A \\", "line continuation"),
    ("A=1 mpirun ./a.out", "only more KEY=VALUE assignments may follow"),
    ("export A=1 B=2 -n", "only more KEY=VALUE assignments may follow"),
    ("A=1; B=2", "command separator"),
    ("A=1 && B=2", "'&'"),
    ("A=x | tee", "pipe"),
    ("A=x > f", "redirection"),
    ("A=(1 2)", "subshell or array"),
    ("A=${B:-default}", r"parameter expansion \$\{B:-default\}"),
    ("A=${B", r"unterminated \$\{"),
    ("A=$1", r"special parameter \$1"),
    ("A=~/lib", "tilde expansion"),
    ("A=/x:~/lib", "tilde expansion"),
    ("A='open", "unterminated single quote"),
    ('A="open', "unterminated double quote"),
    ("A+=x", r"'\+=' is not supported"),
    ("unset -f myfunc", "not a variable name"),
    ("unset", "unset needs a variable name"),
    ("export", "export needs KEY=VALUE"),
    ("export -n A", "export options"),
    ("module load nccl", "module command"),
    ("echo hi", "not a KEY=VALUE assignment"),
    ("1A=x", "not a KEY=VALUE assignment"),
]


@pytest.mark.parametrize("line,reason", REJECTED)
def test_rejected_constructs_name_file_and_line(line, reason):
    text = f"# header\nexport OK=1\n\n{line}\nexport LATER=1\n"
    with pytest.raises(ConfigError) as err:
        parse_env_file(text, {}, where="setups/bad.env")
    msg = str(err.value)
    assert msg.startswith("setups/bad.env:4: "), msg
    assert re.search(reason, msg), msg
    assert msg.endswith("; " + ALLOWED), msg
    assert "\n" not in msg


def test_default_where_and_first_bad_line_wins():
    with pytest.raises(ConfigError, match=r"^env file:2: 'A=\$\(x\)'"):
        parse_env_file("OK=1\nA=$(x)\nB=`y`\n", {})
