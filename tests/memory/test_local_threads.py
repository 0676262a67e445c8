"""The local model's threads: the default (chosen per call, ``threads.py``) is what the README says,
a set ``nThreads`` reaches llama.cpp as is, and the vectors do not depend on the count (real model)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from pydantic import ValidationError

from sessionmem.config import LocalEmbeddingConfig, MemorySearchConfig
from sessionmem.memory.embed.choice import select_embedder
from sessionmem.memory.embed.local_gguf import LocalEmbedder
from sessionmem.memory.embed.threads import (
    MIN_MEASURED_TOKENS,
    ThreadChooser,
    candidate_counts,
    usable_cores,
)

README = Path(__file__).resolve().parents[2] / "README.md"
NOTES = [
    f"# note {i}\n\n"
    + "\n".join(
        f"- item {j}: the ledger migration moved table {i * 13 + j} to the new cluster on day {j}"
        for j in range(12)
    )
    for i in range(20)
]  # 20 chunk-sized texts (~250 model tokens each): three calls of up to 8, each one measured


def local(model: Path, **local_settings: object) -> LocalEmbedder:
    settings = MemorySearchConfig.model_validate(
        {"provider": "local", "local": {"modelPath": str(model), **local_settings}}
    )
    embedder = select_embedder(settings, {}).embedder
    assert isinstance(embedder, LocalEmbedder)
    return embedder


def test_the_default_is_what_the_readme_says(gguf_model: Path) -> None:
    row = next(
        line
        for line in README.read_text(encoding="utf-8").splitlines()
        if "`memorySearch.local.nThreads`" in line
    )
    default, meaning = (cell.strip() for cell in row.split("|")[2:4])
    assert default == "unset: chosen per call"
    assert "set it to the number of cores" in meaning  # what to do on a dedicated host
    assert LocalEmbeddingConfig().n_threads is None
    embedder = local(gguf_model)
    assert embedder.thread_chooser is not None
    assert embedder.thread_chooser.candidates == tuple(sorted(candidate_counts(usable_cores())))
    assert embedder.threads == 1  # before anything is measured: the count that never collapses
    embedder.embed_documents(NOTES)
    if usable_cores() > 1:  # each count was tried, and the model ran with the one chosen
        assert set(embedder.thread_chooser.calls) == set(embedder.thread_chooser.candidates)
    llm = embedder._load()
    assert llm.n_threads_batch == embedder.threads


@pytest.mark.parametrize("count", [1, 2, 3])
def test_a_set_nthreads_reaches_llama_cpp(gguf_model: Path, count: int) -> None:
    embedder = local(gguf_model, nThreads=count)
    assert embedder.thread_chooser is None
    embedder.embed_documents(NOTES[:2])
    params = embedder._load().context_params
    assert (params.n_threads, params.n_threads_batch) == (count, count)
    assert embedder.threads == count


@pytest.mark.parametrize("bad", [0, -2, "many"])
def test_a_bad_nthreads_is_refused_by_name(bad: object) -> None:
    with pytest.raises(ValidationError, match="nThreads"):
        MemorySearchConfig.model_validate({"local": {"nThreads": bad}})


def test_vectors_are_identical_bit_for_bit_whatever_the_thread_count(gguf_model: Path) -> None:
    one = local(gguf_model, nThreads=1).embed_documents(NOTES)
    two = local(gguf_model, nThreads=2).embed_documents(NOTES)
    chosen = local(gguf_model)  # switches counts between its calls on a host with more than one core
    per_call = chosen.embed_documents(NOTES)
    assert one.shape == (len(NOTES), 384)
    assert np.array_equal(one, two)
    assert np.array_equal(one, per_call)


# ---------------------------------------------------------------------------- the choice itself


def drive(chooser: ThreadChooser, rate_of: dict[int, float], calls: int, tokens: int = 2000) -> list[int]:
    """``calls`` calls of ``tokens`` tokens that run at ``rate_of[count]`` tokens/s; the counts used."""
    used = []
    for _ in range(calls):
        count = chooser.next_count(tokens)
        chooser.record(count, tokens, tokens / rate_of[count])
        used.append(count)
    return used


def test_when_a_core_is_busy_one_thread_is_used_and_probes_stay_within_their_share() -> None:
    chooser = ThreadChooser(candidate_counts(2))
    collapsed = {1: 2000.0, 2: 500.0}  # tokens/s: every core 4x slower, as measured under one busy core
    used = drive(chooser, collapsed, 400)
    assert used[:2] == [1, 2]  # each tried once, one thread first
    assert chooser.current == 1
    probe_time = sum(1 / collapsed[c] for c in used[2:] if c == 2)
    total_time = sum(1 / collapsed[c] for c in used)
    assert probe_time / total_time < 0.03  # the budget shrank towards its floor while probes lost
    assert used[-100:].count(2) <= 2


def test_an_idle_host_gets_every_core_and_load_arriving_moves_it_to_one_thread_at_once() -> None:
    chooser = ThreadChooser(candidate_counts(2))
    drive(chooser, {1: 2000.0, 2: 3500.0}, 50)
    assert chooser.current == 2
    used = drive(chooser, {1: 1900.0, 2: 450.0}, 50)  # load arrives
    assert used[:4].count(1) >= 2 and chooser.current == 1
    used = drive(chooser, {1: 2000.0, 2: 3500.0}, 400)  # and leaves: a probe finds it
    assert chooser.current == 2 and used[-50:].count(2) >= 49


def test_short_calls_use_the_current_count_and_teach_nothing() -> None:
    chooser = ThreadChooser(candidate_counts(4))
    assert chooser.candidates == (1, 2, 3, 4)
    for _ in range(10):
        count = chooser.next_count(MIN_MEASURED_TOKENS - 1)
        chooser.record(count, MIN_MEASURED_TOKENS - 1, 10.0)
    assert chooser.calls == {1: 10}
    assert drive(chooser, {1: 1.0, 2: 2.0, 3: 3.0, 4: 2.5}, 4) == [1, 2, 3, 4]  # then each is tried
    assert chooser.current == 3


def test_thread_counts_below_one_are_refused() -> None:
    with pytest.raises(ValueError, match="1 or more"):
        ThreadChooser((0, 1))
    assert candidate_counts(1) == (1,) and candidate_counts(8) == (8, 7, 4, 1)
