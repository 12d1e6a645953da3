"""Mutations of chapter 18: each breaks one claim; the named checks must catch it."""

NB = "chapters/18_paged_attention.ipynb"
CACHE = "src/selfattention/layers/paged_cache.py"
TESTS = "tests/test_paged_cache.py"

MUTATIONS = [
    {
        "id": "extra-block-per-sequence",
        "claim": "a paged cache wastes at most b - 1 slots per sequence",
        "file": CACHE,
        "old": "while len(table) < blocks_for(length + count, self.block_size):",
        "new": "while len(table) <= blocks_for(length + count, self.block_size):",
        "caught_by": [NB, f"{TESTS}::test_free_returns_exactly_the_blocks_in_use"],
    },
    {
        "id": "copy-on-write-forgets-values",
        "claim": "copy-on-write: the parent and the child keep their own keys and values",
        "file": CACHE,
        "old": "        self.value[target] = self.value[source]\n",
        "new": "",
        # Not the stateful TestAllocatorMachine: its random programs found this
        # in most runs, but not in every one.
        "caught_by": [NB, f"{TESTS}::test_fork_and_copy_on_write_leave_the_parent_unchanged"],
    },
    {
        "id": "copy-on-write-wrong-block",
        "claim": "B's first append copied A's partly filled block 1 to block 4 (copy-on-write)",
        "file": CACHE,
        "old": "cache._copy_block(source, copy)",
        "new": "cache._copy_block(table[0], copy)",
        "caught_by": [NB, f"{TESTS}::test_fork_and_copy_on_write_leave_the_parent_unchanged"],
    },
    {
        "id": "fork-resets-refcount",
        "claim": "fork shares every block of the parent, with reference counts",
        "file": CACHE,
        "old": "            self._refs[block] += 1",
        "new": "            self._refs[block] = 1",
        "caught_by": [NB, f"{TESTS}::test_fork_and_copy_on_write_leave_the_parent_unchanged"],
    },
    {
        "id": "plan-forgets-the-copy",
        "claim": "running out of blocks raises OutOfBlocksError and changes nothing",
        "file": CACHE,
        "old": "                needed += 1\n",
        "new": "",
        "caught_by": [
            f"{TESTS}::test_running_out_of_blocks_changes_nothing",
            f"{TESTS}::TestAllocatorMachine",
        ],
    },
    {
        "id": "free-shared-blocks",
        "claim": "free returns exactly the blocks whose reference count drops to 0",
        "file": CACHE,
        "old": "            if self._refs[block] == 0:",
        "new": "            if self._refs[block] <= 1:",
        "caught_by": [
            f"{TESTS}::test_free_returns_exactly_the_blocks_in_use",
            f"{TESTS}::TestAllocatorMachine",
        ],
    },
    {
        "id": "query-misses-its-own-key",
        "claim": "each row of paged_attention equals SDPA over that sequence's gathered keys",
        "file": CACHE,
        "old": "keep = j[None, None, :] <= i[:, :, None]",
        "new": "keep = j[None, None, :] < i[:, :, None]",
        "caught_by": [NB, f"{TESTS}::test_paged_attention_equals_sdpa_on_gathered_keys"],
    },
    {
        "id": "gqa-heads-interleaved",
        "claim": "query head r reads key/value head r // (h / h_kv), as SDPA's enable_gqa",
        "file": CACHE,
        "old": "q = query.reshape(batch, cache.num_kv_heads, groups, t_q, d)",
        "new": "q = query.reshape(batch, groups, cache.num_kv_heads, t_q, d).transpose(1, 2)",
        "caught_by": [NB, f"{TESTS}::test_paged_attention_equals_sdpa_on_gathered_keys"],
    },
    {
        "id": "rope-restarts-at-zero",
        "claim": "paged decoding equals per-sequence KVCache decoding (own positions)",
        "file": "src/selfattention/layers/paged_decode.py",
        "old": "starts = [length - t_new if not reserve else length for length in lengths]",
        "new": "starts = [0 for length in lengths]",
        "caught_by": [
            NB,
            f"{TESTS}::test_paged_batch_of_lengths_1_to_50_equals_kv_cache_decoding",
        ],
    },
    {
        "id": "hashes-not-chained",
        "claim": "one changed token reuses nothing from its block on: the hashes are chained",
        "file": "src/selfattention/layers/prefix_cache.py",
        "old": "digest = hashlib.sha256(previous)",
        "new": "digest = hashlib.sha256()",
        "caught_by": [
            NB,
            f"{TESTS}::test_a_block_is_reused_only_after_the_same_blocks_before_it",
        ],
    },
    {
        "id": "prefix-reuses-the-whole-prompt",
        "claim": "a new request reuses cached blocks and computes at least one prompt token",
        "file": "src/selfattention/layers/prefix_cache.py",
        "old": "usable = max(len(tokens) - 1, 0) // self.block_size",
        "new": "usable = len(tokens) // self.block_size",
        "caught_by": [
            f"{TESTS}::test_one_token_changed_inside_a_block_reuses_nothing_from_that_block_on",
        ],
    },
    {
        "id": "policies-swapped",
        "claim": "continuous batching makes more tokens per step and shorter waits than static",
        "file": NB,
        "old": 'if policy == "continuous" or not running:',
        "new": 'if policy == "static" or not running:',
        "caught_by": [NB],
    },
    {
        "id": "table-entries-counted-as-slots",
        "claim": "the block tables hold fewer entries as the block size grows, as 1 / b",
        "file": NB,
        "old": "    entries.append(held)",
        "new": "    entries.append(held * size)",
        "caught_by": [NB],
    },
    {
        "id": "blocks-packed-across-sequences",
        "claim": "Exercise 1: each sequence has its own blocks",
        "file": NB,
        "old": "    return sum(-(-n // block_size) for n in lengths)",
        "new": "    return -(-sum(lengths) // block_size)",
        "caught_by": [NB],
        "sample": True,
    },
    {
        "id": "partial-block-counted-as-shared",
        "claim": "Exercise 2: the partly filled prompt block is copied by all samples but one",
        "file": NB,
        "old": "    shared = prompt_length // block_size",
        "new": "    shared = -(-prompt_length // block_size)",
        "caught_by": [NB],
    },
]
