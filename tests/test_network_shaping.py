"""Network conditions on real kernel state (envmatrix.network.shaping): what is installed is what was asked, it is
measured on a real TCP transfer between two namespaces, and it goes away after a normal end, an exception,
Ctrl-C and kill -9 (the next command removes it and says so). The safety refusals come before anything is
installed. Needs root and network namespaces; netem-only tests skip on kernels without sch_netem (this one)."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from envmatrix import cluster as emulated
from envmatrix.boundary import ProcessSpec
from envmatrix.errors import PlanError
from envmatrix.execution import processes
from envmatrix.execution.netns import netns_argv
from envmatrix.network import netlink, qdiscs, shaping, state, tctree, unrecorded
from envmatrix.network.conditions import parse_condition

REASON = emulated.unavailable_reason()
pytestmark = pytest.mark.skipif(REASON is not None, reason=REASON or "")

RATE = parse_condition("r100", "rate=100mbit", "test")


@pytest.fixture
def state_dir(tmp_path, monkeypatch):
    """This test's own state root: what it records (and reaps) is its own, whatever else runs on the machine."""
    root = tmp_path / "state"
    monkeypatch.setenv(state.STATE_ENV, str(root))
    return root


@pytest.fixture
def pair(state_dir):
    """Two emulated hosts on a bridge (node0, node1); removed and checked clean after the test."""
    made = emulated.up(2)
    yield made
    made.close()


def ours(link) -> list[str]:
    """envmatrix's qdiscs (its handles) on the link and the ifbs beside it."""
    with netlink.route(link.netns) as ipr:
        index = netlink.ifindex(ipr, link.netns, link.ifname)
        found = [f"{i.kind} {tctree.fmt_handle(i.handle)}" for i in tctree.tc_tree(ipr, index)
                 if i.what == "qdisc" and i.handle in (qdiscs.ROOT_HANDLE, qdiscs.NETEM_HANDLE, qdiscs.INGRESS_HANDLE)]
        found += [link.get_attr("IFLA_IFNAME") for link in ipr.get_links()
                  if link.get_attr("IFLA_IFNAME").startswith(qdiscs.IFB_PREFIX)]
    return found


def state_files(state_dir: Path) -> list[str]:
    return sorted(p.name for p in (state_dir / "network").glob("*.json")) if (state_dir / "network").is_dir() else []


RECEIVER = """
import json, socket, sys, time
size = int(sys.argv[1])
srv = socket.socket(); srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); srv.bind(("0.0.0.0", 5201)); srv.listen(1)
conn, _ = srv.accept()
got, first = 0, None
while got < size:
    chunk = conn.recv(1 << 20)
    if not chunk:
        break
    first = first or time.monotonic()
    got += len(chunk)
print(json.dumps({"bytes": got, "seconds": time.monotonic() - first}))
"""
SENDER = """
import socket, sys, time
host, size = sys.argv[1], int(sys.argv[2])
for _ in range(100):
    try:
        s = socket.create_connection((host, 5201), 1); break
    except OSError:
        time.sleep(0.05)
s.settimeout(None)
s.sendall(b"x" * size); s.close()
"""


def timed_transfer(cluster, sender: str, receiver: str, size: int, tmp_path: Path) -> float:
    """Seconds ``size`` bytes took from ``sender`` to ``receiver`` over TCP, measured at the receiver; both
    python processes run in their hosts' namespaces, started through envmatrix.execution."""
    env = dict(os.environ)
    specs = [ProcessSpec(tuple(cluster.argv_in(receiver, [sys.executable, "-c", RECEIVER, str(size)])), env,
                         str(tmp_path / "receiver.log"), "receiver"),
             ProcessSpec(tuple(cluster.argv_in(sender, [sys.executable, "-c", SENDER, cluster.addresses[receiver], str(size)])),
                         env, str(tmp_path / "sender.log"), "sender")]
    outcomes = processes.run_group(specs, timeout_s=60)
    logs = (tmp_path / "receiver.log").read_text()
    assert [o.exit_code for o in outcomes] == [0, 0], logs + (tmp_path / "sender.log").read_text()
    report = json.loads(logs.strip().splitlines()[-1])
    assert report["bytes"] == size
    return report["seconds"]


# -- what is installed, and that it goes away


def test_a_rate_is_an_htb_tree_removed_after_a_normal_end(pair, state_dir):
    link = pair.host_link("node0")
    with shaping.shaped([link], RATE) as proof:
        assert ours(link) == ["htb e1a0:"]
        assert state_files(state_dir) == [f"{os.getpid()}.json"]  # recorded while installed
        assert "class htb e1a0:10 root rate 100mbit ceil 100mbit" in proof.links[0].before
    assert ours(link) == [] and state_files(state_dir) == []
    assert proof.links[0].restored is True
    assert "Sent" in proof.links[0].after and proof.value == "rate=100mbit"


def test_an_exception_in_the_block_still_removes_everything(pair, state_dir):
    link = pair.host_link("node0")
    ingress = parse_condition("ri", "rate=100mbit,ingress=true", "test")
    with pytest.raises(RuntimeError, match="boom"):
        with shaping.shaped([link, shaping.Link(None, pair.veth("node0"))], ingress):
            assert sorted(ours(link)) == sorted(["htb e1a0:", "ingress ffff:", f"{qdiscs.IFB_PREFIX}2"])
            raise RuntimeError("boom")
    assert ours(link) == [] and ours(shaping.Link(None, pair.veth("node0"))) == [] and state_files(state_dir) == []


def test_the_unshaped_condition_touches_nothing(pair, state_dir):
    link = pair.host_link("node0")
    with shaping.shaped([link], parse_condition("default", {}, "test")) as proof:
        assert ours(link) == [] and state_files(state_dir) == [] and proof.links == []


SHAPER = """
import sys, time
from envmatrix.network import shaping
from envmatrix.network.conditions import parse_condition
with shaping.shaped([(sys.argv[1], "eth0")], parse_condition("c", sys.argv[2], "test")):
    print("shaped", flush=True)
    time.sleep(120)
"""


def start_shaper(link, spec: str) -> subprocess.Popen:
    proc = subprocess.Popen([sys.executable, "-c", SHAPER, link.netns, spec], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "shaped", proc.stderr.read()
    return proc


@pytest.mark.slow
def test_ctrl_c_in_a_shaping_process_removes_its_qdiscs(pair, state_dir):
    link = pair.host_link("node0")
    proc = start_shaper(link, "rate=50mbit,ingress=true")
    assert len(ours(link)) == 3 and len(state_files(state_dir)) == 1
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=30)
    assert "KeyboardInterrupt" in err  # it went through the context manager's cleanup, not around it
    assert ours(link) == [] and state_files(state_dir) == []


@pytest.mark.slow
def test_after_kill_9_the_next_command_removes_the_qdiscs_and_says_so(pair, state_dir, cli):
    link = pair.host_link("node1")
    proc = start_shaper(link, "rate=50mbit,ingress=true")
    proc.kill()
    proc.wait()
    assert len(ours(link)) == 3 and len(state_files(state_dir)) == 1  # kill -9: nothing could clean up
    done = cli.run("cluster", "list")  # any command; this one needs nothing else of the tree
    assert done.returncode == 0, done.stderr
    said = [line for line in done.stderr.splitlines() if "removed network shaping" in line]
    assert len(said) == 1 and "left by a killed run" in said[0] and f"htb on eth0 (namespace {link.netns})" in said[0]
    assert "ifb" in said[0] and "ingress redirect" in said[0]
    assert ours(link) == [] and state_files(state_dir) == []
    again = cli.run("cluster", "list")
    assert "removed network shaping" not in again.stderr  # said once, by the command that did it


@pytest.mark.slow
def test_network_reset_removes_a_killed_runs_qdiscs_and_lists_them(pair, state_dir, cli):
    link = pair.host_link("node0")
    proc = start_shaper(link, "rate=50mbit")
    proc.kill()
    proc.wait()
    shown = cli.run("network", "show")
    assert shown.returncode == 0 and "dead: the next command removes it" in shown.stdout and "htb e1a0:" in shown.stdout
    reset = cli.run("network", "reset")
    assert reset.returncode == 0, reset.stderr
    assert f"removed htb on eth0 (namespace {link.netns})" in reset.stdout
    assert ours(link) == [] and state_files(state_dir) == []
    assert "nothing to remove" in cli.run("network", "reset").stdout


@pytest.mark.slow
def test_network_reset_leaves_a_live_runs_shaping_unless_forced(pair, state_dir, cli):
    link = pair.host_link("node0")
    proc = start_shaper(link, "rate=50mbit")
    try:
        kept = cli.run("network", "reset")
        assert kept.returncode == 0 and "kept eth0" in kept.stdout and ours(link) == ["htb e1a0:"]
        forced = cli.run("network", "reset", "--force")
        assert forced.returncode == 0 and "removed htb on eth0" in forced.stdout and ours(link) == []
    finally:
        proc.kill()
        proc.wait()


@pytest.mark.slow
def test_unrecorded_handles_are_found_and_removed_without_a_state_file(pair, state_dir):
    # Only this test's namespaces are scanned: a parallel test's shaping (its state elsewhere) is not ours to remove.
    link = pair.host_link("node0")
    proc = start_shaper(link, "rate=50mbit,ingress=true")
    try:
        proc.kill()
        proc.wait()
        shutil.rmtree(state_dir / "network")  # as if /run had been cleared
        mine = [pair.ns(h) for h in pair.hosts]
        assert sorted(kind for _, kind in unrecorded.installed_anywhere(mine)) == ["htb", "ifb"]
        removed = unrecorded.remove_unrecorded(netns_names=mine)
        assert f"htb on eth0 (namespace {link.netns}) (unrecorded: what was there before is unknown)" in removed
        assert any(r.startswith("ingress redirect on link 2") for r in removed)
        assert ours(link) == []
    finally:
        proc.kill()
        proc.wait()


# -- safety, before anything is installed


def test_the_default_route_interface_is_refused_before_anything_is_installed(state_dir):
    with netlink.route(None) as ipr:
        indexes = netlink.default_route_interfaces(ipr)
        names = [ipr.get_links(i)[0].get_attr("IFLA_IFNAME") for i in indexes]
    if not names:
        pytest.skip("this machine has no default route")
    with pytest.raises(PlanError, match="carries the default route; shaping it could cut this machine off"):
        with shaping.shaped([(None, names[0])], RATE):
            pytest.fail("entered the block")
    assert state_files(state_dir) == []


def test_loopback_is_refused(pair, state_dir):
    for link in [(None, "lo"), (pair.ns("node0"), "lo")]:
        with pytest.raises(PlanError, match="is the loopback interface, .*only with allow_default_route: true"):
            shaping.check_applicable([link], RATE)
    assert state_files(state_dir) == []


def test_a_missing_interface_is_refused_naming_it(pair):
    with pytest.raises(PlanError, match=f"interface nope0 \\(namespace {pair.ns('node0')}\\) does not exist"):
        shaping.check_applicable([(pair.ns("node0"), "nope0")], RATE)


@pytest.mark.slow
def test_without_privileges_shaping_is_refused_in_one_line(pair, cli, tmp_path):
    if shutil.which("setpriv") is None:
        pytest.skip("setpriv (util-linux) is needed to drop CAP_NET_ADMIN")
    code = ("from envmatrix.network import shaping; from envmatrix.network.conditions import parse_condition\n"
            f"shaping.check_applicable([('{pair.ns('node0')}', 'eth0')], parse_condition('r', 'rate=1gbit', 'x'))")
    # root without CAP_NET_ADMIN (as in a container that was not given it)
    done = subprocess.run(["setpriv", "--bounding-set=-net_admin", "--inh-caps=-net_admin", sys.executable, "-c", code],
                          capture_output=True, text=True, cwd=tmp_path)
    assert done.returncode != 0
    assert "PlanError: network condition r (rate=1gbit): needs root or CAP_NET_ADMIN to install qdiscs" in done.stderr


def test_a_netem_condition_is_refused_up_front_on_a_kernel_without_netem(pair, state_dir):
    if shaping.kernel_support()["netem"] is None:
        pytest.skip("this kernel has sch_netem: the refusal cannot happen here")
    delay = parse_condition("d5_b2", "delay=5ms,rate=2gbit", "test")
    with pytest.raises(PlanError) as err:
        with shaping.shaped([pair.host_link("node0")], delay):
            pytest.fail("entered the block")
    message = str(err.value)
    assert "\n" not in message
    assert message.startswith("network condition d5_b2 (rate=2gbit,delay=5ms): this kernel lacks sch_netem")
    assert "what still works here: rate via htb" in message
    assert ours(pair.host_link("node0")) == [] and state_files(state_dir) == []


def test_on_a_netem_kernel_a_delay_is_applied_and_measured(pair, state_dir):
    support = shaping.kernel_support()["netem"]
    if support is not None:
        pytest.skip(f"this kernel has no sch_netem ({support}): delay, jitter and loss cannot be applied here")
    link = pair.host_link("node0")
    with shaping.shaped([link], parse_condition("d20", "delay=20ms,rate=1gbit", "test")) as proof:
        assert "qdisc netem e1a1: parent e1a0:10" in proof.links[0].before
        argv = pair.argv_in("node0", [sys.executable, "-c", "import socket,time\nt=time.monotonic()\n"
                                      "try: socket.create_connection(('%s', 9), 2)\nexcept OSError: pass\n"
                                      "print(time.monotonic()-t)" % pair.addresses["node1"]])
        rtt = float(processes.run_capture(argv).stdout.strip())
    assert rtt >= 0.018  # the SYN waits 20 ms on the way out
    assert ours(link) == []


# -- an existing qdisc is put back exactly


def tc_show(link) -> str:
    """tc's reading of the link's configuration; htb's direct_packets_stat is a packet counter (a router
    solicitation may pass meanwhile), not configuration."""
    text = processes.run_capture(["tc", "-n", link.netns, "qdisc", "show", "dev", link.ifname]).stdout + \
        processes.run_capture(["tc", "-n", link.netns, "class", "show", "dev", link.ifname]).stdout
    return re.sub(r"direct_packets_stat \d+", "direct_packets_stat N", text)


def config_bytes(link) -> list[bytes]:
    with netlink.route(link.netns) as ipr:
        return [i.config for i in tctree.tc_tree(ipr, netlink.ifindex(ipr, link.netns, link.ifname))]


@pytest.mark.parametrize("tree", ["tbf", "htb"])
def test_an_existing_root_qdisc_is_restored_byte_for_byte(pair, state_dir, tree):
    link = pair.host_link("node1")
    with netlink.route(link.netns) as ipr:
        index = netlink.ifindex(ipr, link.netns, link.ifname)
        if tree == "tbf":
            ipr.tc("add", "tbf", index=index, handle=0x30000, rate="50mbit", burst=20000, latency=50)
        else:  # a user's htb with two classes and a pfifo under one of them
            ipr.tc("add", "htb", index=index, handle=0x70000, default=0x20)
            ipr.tc("add-class", "htb", index=index, handle=0x70010, parent=0x70000, rate="30mbit", ceil="40mbit")
            ipr.tc("add-class", "htb", index=index, handle=0x70020, parent=0x70000, rate="10mbit")
            ipr.tc("add", "pfifo", index=index, handle=0x90000, parent=0x70010, limit=77)
    before_bytes, before_text = config_bytes(link), tc_show(link) if shutil.which("tc") else ""
    with shaping.shaped([link], RATE) as proof:
        assert ours(link) == ["htb e1a0:"] and config_bytes(link) != before_bytes
    assert config_bytes(link) == before_bytes  # the kernel's own dump, every configuration byte
    if before_text:
        assert tc_show(link) == before_text  # and tc's reading of it
    assert proof.links[0].restored is True and f"qdisc {tree} " in proof.links[0].original


def test_a_link_with_tc_filters_is_refused(pair, state_dir):
    link = pair.host_link("node1")
    with netlink.route(link.netns) as ipr:
        index = netlink.ifindex(ipr, link.netns, link.ifname)
        ipr.tc("add", "htb", index=index, handle=0x70000, default=0x20)
        ipr.tc("add-filter", "u32", index=index, parent=0x70000, prio=10, protocol=3, target=0x70010, keys=["0x0/0x0+0"])
    with pytest.raises(PlanError, match="has tc filters under its root qdisc"):
        shaping.check_applicable([link], RATE)


# -- measured


@pytest.mark.slow
def test_a_shaped_rate_sets_the_transfer_time_within_15_percent_of_size_over_rate(pair, state_dir, tmp_path):
    size = 12_500_000  # 1.0 s at 100 Mbit/s
    with shaping.shaped([pair.host_link("node0")], RATE) as proof:
        seconds = timed_transfer(pair, "node0", "node1", size, tmp_path)
    floor = RATE.min_transfer_s(size)
    assert floor <= seconds * 1.02 and abs(seconds - floor) / floor <= 0.15, f"{seconds:.3f} s vs S/R {floor:.3f} s"
    assert proof.sent_bytes()[str(pair.host_link("node0"))] >= size  # it went through the shaper, the proof says so


@pytest.mark.slow
def test_ingress_through_ifb_shapes_the_receive_side(pair, state_dir, tmp_path):
    size = 6_250_000  # 0.5 s at 100 Mbit/s
    receive_side = pair.host_link("node1")
    unshaped_s = timed_transfer(pair, "node0", "node1", size, tmp_path)
    egress_only = parse_condition("egress", "rate=100mbit", "test")
    with shaping.shaped([receive_side], egress_only):
        egress_s = timed_transfer(pair, "node0", "node1", size, tmp_path)  # node1 only sends ACKs: not slowed
    ingress = parse_condition("ingress", "rate=100mbit,ingress=true", "test")
    with shaping.shaped([receive_side], ingress) as proof:
        ingress_s = timed_transfer(pair, "node0", "node1", size, tmp_path)
    floor = ingress.min_transfer_s(size)
    assert abs(ingress_s - floor) / floor <= 0.15, f"ingress {ingress_s:.3f} s vs S/R {floor:.3f} s"
    assert egress_s < floor / 2 and unshaped_s < floor / 2, (unshaped_s, egress_s)
    assert f"[{qdiscs.IFB_PREFIX}2: ingress of eth0]" in proof.links[0].after


def test_a_link_another_envmatrix_run_shapes_is_refused_and_left_as_it_is(pair, state_dir):
    link = pair.host_link("node0")
    with shaping.shaped([link], RATE):
        with pytest.raises(PlanError, match="is shaped by another envmatrix run already"):
            with shaping.shaped([link], parse_condition("r1g", "rate=1gbit", "test")):
                pytest.fail("entered the block")
        assert ours(link) == ["htb e1a0:"] and len(state_files(state_dir)) == 1
    assert ours(link) == [] and state_files(state_dir) == []


def test_ingress_where_an_ingress_qdisc_exists_is_refused_up_front(pair, state_dir):
    link = pair.host_link("node0")
    with netlink.route(link.netns) as ipr:
        ipr.tc("add", "ingress", index=netlink.ifindex(ipr, link.netns, link.ifname))
    with pytest.raises(PlanError, match="has an ingress \\(or clsact\\) qdisc already"):
        shaping.check_applicable([link], parse_condition("ri", "rate=1gbit,ingress=true", "test"))
    with shaping.shaped([link], RATE):  # egress alone leaves the ingress hook as it is
        assert "ingress ffff:" in ours(link)
    assert ours(link) == ["ingress ffff:"] and state_files(state_dir) == []


@pytest.mark.slow
def test_a_killed_runs_entry_never_touches_a_namespace_made_again_under_the_same_name(pair, state_dir):
    link = pair.host_link("node0")
    proc = start_shaper(link, "rate=50mbit")
    proc.kill()
    proc.wait()
    assert pair.down() == []  # its namespace goes, the entry stays (its owner is dead)
    assert len(state_files(state_dir)) == 1
    netlink.create_namespace(link.netns)  # another run's host, by chance of the same name
    try:
        with netlink.route(link.netns) as ipr:
            ipr.link("add", ifname="eth0", kind="veth", peer="p0")
            ipr.link("set", index=netlink.ifindex(ipr, link.netns, "eth0"), state="up")
        with shaping.shaped([link], RATE):
            assert state.reap_stale() == []  # the dead entry is dropped without touching the live one's htb
            assert ours(link) == ["htb e1a0:"]
        assert state_files(state_dir) == []
    finally:
        netlink.remove_namespace(link.netns)


@pytest.mark.slow
def test_threads_of_one_process_shape_links_at_once_and_all_is_removed(pair, state_dir):
    import threading

    links = [pair.host_link("node0"), pair.host_link("node1"), shaping.Link(None, pair.veth("node0")),
             shaping.Link(None, pair.veth("node1"))]
    inside = threading.Barrier(len(links))
    errors = []

    def shape(link):
        try:
            with shaping.shaped([link], RATE):
                inside.wait(timeout=20)  # every link shaped at the same time, each recorded in the one state file
                assert ours(link) == ["htb e1a0:"]
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(f"{link}: {exc!r}")

    threads = [threading.Thread(target=shape, args=(link,)) for link in links]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert errors == []
    assert all(ours(link) == [] for link in links[:2]) and state_files(state_dir) == []


def test_a_hold_started_after_its_run_stopped_installs_nothing(pair, state_dir, tmp_path):
    """A hold whose launch outlasted a Ctrl-C (the run's ``stop`` is written) shapes nothing: had it installed, the
    launcher's kill could catch it before its undo, after the driver's cleanup had looked (CI run 67)."""
    link = pair.host_link("node0")
    hold_dir = tmp_path / "network"
    hold_dir.mkdir()
    (hold_dir / "stop").write_text("")
    argv = [sys.executable, "-m", "envmatrix.network.host", "hold", "--condition", json.dumps(RATE.to_json()),
            "--dir", str(hold_dir), "--interface", link.ifname]
    done = subprocess.run(netns_argv(link.netns, argv), capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    made = sorted(p.suffix for p in hold_dir.iterdir() if p.name != "stop")
    assert made == [".late", ".started"], made  # no .ready, no proof: nothing was installed, so nothing to undo
    assert ours(link) == [] and state_files(state_dir) == []
