"""selfattention.distributed: ring and all-to-all attention equal SDPA on the whole sequence.

Process start-up is the cost here (each rank imports torch), so one spawn of
four ranks runs every attention case, in sub-groups of 1, 2 and 4 ranks;
two more small spawns check that a failing and a hanging rank are cleaned up.
"""

import os
import pathlib
import socket
import sys

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import selfattention
from selfattention.distributed import (
    RankError,
    demos,
    gather_sequence,
    ring_attention,
    ring_bytes_per_rank,
    ring_tiles,
    shard_sequence,
    spawn,
    ulysses_attention,
    ulysses_bytes_per_rank,
)

# (method, world, layout, causal, (B, h, h_kv, T_r, d_k, d_v), scale)
CASES = []
for world in (1, 2, 4):
    for causal in (False, True):
        for layout, t_r in (("contiguous", 1), ("contiguous", 3), ("zigzag", 2), ("zigzag", 6)):
            CASES.append(("ring", world, layout, causal, (2, 4, 2, t_r, 5, 3), None))
        CASES.append(("ring", world, "zigzag", causal, (1, 3, 1, 4, 4, 6), 0.7))  # MQA, a scale
        for t_r in (1, 3):
            CASES.append(("ulysses", world, "contiguous", causal, (2, 8, 4, t_r, 5, 3), None))
        CASES.append(("ulysses", world, "contiguous", causal, (1, 4, 4, 2, 3, 3), 0.5))
IDS = [
    f"{m}-P{w}-{lay}-{'causal' if c else 'full'}-Tr{s[3]}-h{s[1]}kv{s[2]}"
    for m, w, lay, c, s, _ in CASES
]


# Refused on every rank: (shape, the message's core). Ulysses needs whole heads per rank.
REFUSED = [
    ((1, 6, 2, 8, 3, 3), "h must divide by the world size: h = 6, world size 4"),
    ((1, 8, 2, 8, 3, 3), "h_kv must divide by the world size: h_kv = 2, world size 4"),
]


def as_case(index):
    method, world, layout, causal, (b, h, h_kv, t_r, d_k, d_v), scale = CASES[index]
    return {
        "method": method,
        "world": world,
        "layout": layout,
        "causal": causal,
        "scale": scale,
        "shape": (b, h, h_kv, t_r * world, d_k, d_v),
        "seed": index,
    }


def run_every_case():
    """Every case, in one spawn of four ranks: answers[rank][case]."""
    refused = [
        {"method": "ulysses", "world": 4, "causal": False, "shape": shape, "seed": 0}
        for shape, _ in REFUSED
    ]
    cases = [as_case(i) for i in range(len(CASES))] + refused
    return spawn(demos.attention_cases, 4, cases, timeout=240)


def groups_of(answers, index):
    """Each sub-group's answers for one case, in sub-group rank order."""
    world = CASES[index][1]
    return [
        [answers[r][index] for r in range(start, start + world)] for start in range(0, 4, world)
    ]


def check_equals_sdpa(answers, index):
    case = as_case(index)
    q, k, v = demos.make_qkv(case["seed"], *case["shape"])
    expected = demos.reference(q, k, v, case["causal"], case["scale"])
    for group in groups_of(answers, index):
        assert [a["rank"] for a in group] == list(range(case["world"])), IDS[index]
        whole = gather_sequence([a["out"] for a in group], case["layout"])
        assert whole.dtype == torch.float64 and whole.shape == expected.shape, IDS[index]
        error = (whole - expected).abs().max().item()
        assert error < 1e-12, f"{IDS[index]}: differs from SDPA by {error:.2e}"


def check_bytes_and_tiles(answers, index):
    case = as_case(index)
    b, h, h_kv, t, d_k, d_v = case["shape"]
    world = case["world"]
    for group in groups_of(answers, index):
        for answer in group:
            if case["method"] == "ring":
                expected = ring_bytes_per_rank(world, b, h_kv, t, d_k, d_v, 8)
                assert answer["bytes_sent"] == expected, IDS[index]
                assert answer["messages"] == world - 1, IDS[index]  # K and V travel together
                tiles = ring_tiles(world, answer["rank"], case["layout"], case["causal"])
                assert answer["tiles"] == tiles, IDS[index]
            else:
                expected = ulysses_bytes_per_rank(world, b, h, h_kv, t, d_k, d_v, 8)
                assert answer["bytes_sent"] == expected, IDS[index]
                assert answer["messages"] == 2, IDS[index]  # in, and back


def check_refused(answers, which):
    for rank in range(4):
        answer = answers[rank][len(CASES) + which]
        assert "out" not in answer
        assert (
            "ulysses_attention gives each rank whole heads, so " + REFUSED[which][1]
            in (answer["error"])
        )


def test_ring_and_ulysses_in_one_spawn():
    """Every case of CASES, on 1, 2 and 4 ranks, in one spawn (one test, so that
    pytest-xdist starts the processes once): equal to SDPA on the gathered sequence
    to 1e-12 in float64, bytes and tiles per rank as the formulas say, and the
    head counts Ulysses cannot split refused on every rank."""
    answers = run_every_case()
    assert [len(answer) for answer in answers] == [len(CASES) + len(REFUSED)] * 4
    for index in range(len(CASES)):
        check_equals_sdpa(answers, index)
        check_bytes_and_tiles(answers, index)
    for which in range(len(REFUSED)):
        check_refused(answers, which)


def test_the_formulas_by_hand():
    # The prototype: P = 4, B = 1, h = 4, T = 256, d = 32, float64.
    assert ring_bytes_per_rank(4, 1, 4, 256, 32, 32, 8) == 393_216
    # Ulysses sends (P - 1)/P of Q, K, V and O: 4 (T/P) h d e (P - 1)/P.
    assert ulysses_bytes_per_rank(4, 1, 4, 4, 256, 32, 32, 8) == 4 * 64 * 4 * 32 * 8 * 3 // 4
    with pytest.raises(ValueError, match="num_heads = 6 does not divide by world_size = 4"):
        ulysses_bytes_per_rank(4, 1, 6, 2, 256, 32, 32, 8)


def test_causal_work_contiguous_against_zigzag():
    for world in (2, 4, 8):
        contiguous = [len(ring_tiles(world, r, "contiguous")) for r in range(world)]
        zigzag = [len(ring_tiles(world, r, "zigzag")) for r in range(world)]
        assert contiguous == list(range(1, world + 1))  # tiles of (T/P)^2
        assert zigzag == [2 * world + 1] * world  # tiles of (T/2P)^2: balanced
        assert len(ring_tiles(world, 0, "zigzag", causal=False)) == 4 * world


@settings(max_examples=30, deadline=None)
@given(
    world=st.integers(1, 5),
    pieces=st.integers(1, 3),
    layout=st.sampled_from(["contiguous", "zigzag"]),
    width=st.integers(1, 3),
)
def test_shard_and_gather_undo_each_other(world, pieces, layout, width):
    chunks = world if layout == "contiguous" else 2 * world
    x = torch.arange(chunks * pieces * width * 2).reshape(2, chunks * pieces, width)
    parts = [shard_sequence(x, world, r, layout, dim=1) for r in range(world)]
    assert torch.equal(gather_sequence(parts, layout, dim=1), x)
    assert sorted(torch.cat(parts, dim=1)[0, :, 0].tolist()) == x[0, :, 0].tolist()


def test_layout_errors_name_the_problem():
    x = torch.zeros(1, 1, 6, 2)
    with pytest.raises(ValueError, match="T = 6 .* 8 equal chunks of layout 'zigzag'"):
        shard_sequence(x, 4, 0, "zigzag")
    with pytest.raises(ValueError, match="layout must be 'contiguous' or 'zigzag', got 'ring'"):
        shard_sequence(x, 2, 0, "ring")
    with pytest.raises(ValueError, match="rank must be in 0 .. world_size - 1 = 1, got 2"):
        shard_sequence(x, 2, 2)
    with pytest.raises(ValueError, match="must be even, got 3"):
        gather_sequence([torch.zeros(1, 3, 2)] * 2, "zigzag")
    with pytest.raises(ValueError, match="every rank's part must have one shape"):
        gather_sequence([torch.zeros(1, 2, 2), torch.zeros(1, 4, 2)])


def test_attention_outside_a_process_group_says_so():
    q = torch.zeros(1, 2, 4, 3)
    for fn in (ring_attention, ulysses_attention):
        with pytest.raises(RuntimeError, match="no process group"):
            fn(q, q, q)
    with pytest.raises(ValueError, match="multiple of the key/value heads"):
        ring_attention(q, torch.zeros(1, 3, 4, 3), torch.zeros(1, 3, 4, 3))
    with pytest.raises(ValueError, match="T_r must be even, got 3"):
        ring_attention(*(torch.zeros(1, 2, 3, 3),) * 3, layout="zigzag")


def test_spawn_refuses_a_function_it_cannot_import():
    def local(rank, world_size):
        return rank

    with pytest.raises(ValueError, match="importable module"):
        spawn(local, 2)
    with pytest.raises(TypeError, match="world_size"):
        spawn(demos.rank_and_size, 2.0)
    with pytest.raises(ValueError, match="timeout"):
        spawn(demos.rank_and_size, 2, timeout=0)


def test_the_package_does_not_import_distributed():
    source = pathlib.Path(selfattention.__file__).read_text()
    assert "distributed" not in source.split('"""')[2]  # the code after the docstring


def child_processes():
    """Our live or zombie processes, from /proc: our children, and the children of
    multiprocessing's forkserver (spawn's ranks start there), with the resource
    tracker and the forkserver itself aside (they serve the whole process)."""
    processes = []
    for entry in pathlib.Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            status = (entry / "status").read_text()
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        fields = dict(line.split(":\t", 1) for line in status.splitlines() if ":\t" in line)
        processes.append(
            (
                int(entry.name),
                int(fields.get("PPid", "0")),
                fields.get("State", "").strip(),
                cmdline,
            )
        )
    servers = {
        pid
        for pid, parent, _, cmdline in processes
        if parent == os.getpid() and "forkserver" in cmdline
    }
    return [
        (pid, state, cmdline)
        for pid, parent, state, cmdline in processes
        if (parent == os.getpid() or parent in servers)
        and pid not in servers
        and "resource_tracker" not in cmdline
    ]


def listening_sockets():
    """The inodes of this process's TCP sockets in the LISTEN state (/proc/net/tcp)."""
    ours = set()
    for fd in pathlib.Path("/proc/self/fd").iterdir():
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        if target.startswith("socket:["):
            ours.add(target[8:-1])
    listening = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in pathlib.Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            if fields[3] == "0A" and fields[9] in ours:
                listening.add(fields[9])
    return listening


@pytest.fixture
def store_ports(monkeypatch):
    """The ports that spawn's rendezvous store listened on."""
    import torch.distributed as dist

    ports = []
    real = dist.TCPStore

    def recording(*args, **kwargs):
        store = real(*args, **kwargs)
        ports.append(store.port)
        return store

    monkeypatch.setattr(dist, "TCPStore", recording)
    return ports


def assert_cleaned_up(ports, before):
    """No process of spawn's left (live or zombie), no socket listening, the ports free."""
    import multiprocessing

    children_before, listening_before = before
    assert multiprocessing.active_children() == []
    assert set(child_processes()) <= children_before
    assert listening_sockets() == listening_before
    for port in ports:
        with socket.socket() as probe:  # the port is free: we can listen on it
            probe.bind(("127.0.0.1", port))
            probe.listen()


def test_a_rank_that_raises_is_named_and_every_process_ends(store_ports):
    before = set(child_processes()), listening_sockets()
    with pytest.raises(
        RankError, match="rank 1 raised ValueError: rank 1 was told to fail"
    ) as info:
        spawn(demos.raise_on, 2, 1, timeout=120)
    assert info.value.rank == 1
    assert len(store_ports) == 1
    assert_cleaned_up(store_ports, before)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="spawn off Linux")
def test_on_linux_the_ranks_fork_from_one_server_that_imported_torch():
    # Each rank forks from multiprocessing's forkserver (launch._context), which
    # imported torch once, instead of starting a Python of its own that imports it.
    parents = spawn(demos.parent_process, 2, timeout=120)
    server = parents[0]
    assert parents == [server, server] and server != os.getpid()
    maps = pathlib.Path(f"/proc/{server}/maps").read_text()
    assert "libtorch" in maps, "the forkserver has not imported torch"


def test_a_hanging_rank_hits_the_timeout_and_every_process_ends(store_ports):
    before = set(child_processes()), listening_sockets()
    with pytest.raises(TimeoutError, match="did not finish within 2 s"):
        spawn(demos.sleep_forever, 2, timeout=2)
    assert_cleaned_up(store_ports, before)
