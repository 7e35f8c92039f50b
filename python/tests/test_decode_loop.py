"""The decode loop of a language model from Python: a decoder step with a KV cache
(bench/decoder_step.py, as torch.onnx.export writes one) run step after step from an
empty cache, the cache kept on the server, only the logits fetched."""
import os
import sys

import numpy as np
import onnx
import pytest

import remex

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "bench"))
import decoder_step  # noqa: E402

STEPS = 32


@pytest.fixture(scope="module")
def decoder(tmp_path_factory):
    path = tmp_path_factory.mktemp("decoder") / "decoder_step.onnx"
    onnx.save(decoder_step.build(layers=2, hidden=64, heads=4, ffn=128, vocab=256, seed=3), str(path))
    return str(path)


def test_steps_from_an_empty_cache_match_the_whole_sequence_at_one_round_trip_each(server, decoder):
    tokens = np.random.default_rng(0).integers(0, 256, STEPS)
    with remex.connect(server.address, timeout=60) as s:
        # No bounds: past_sequence admits 0, the first step's empty cache.
        m = s.load(decoder)
        past_names = [i.name for i in m.inputs if i.name.startswith("past_")]
        past = {n: np.zeros((1, 4, 0, 16), np.float32) for n in past_names}
        step_logits = []
        trips = s.traffic()["round_trips"]
        for t in tokens:
            out = m.run({"input_ids": np.array([[t]], np.int64), **past}, fetch=["logits"])
            step_logits.append(out["logits"][0, 0])
            past = {n: out["present_" + n[len("past_"):]] for n in past_names}
            assert all(isinstance(p, remex.Tensor) for p in past.values())  # the cache stays on the server
            assert tuple(past["past_key_0"].shape) == (1, 4, len(step_logits), 16)
        # One round trip per step: the token's upload, the invoke and the logits' download
        # together, the dropped cache freed without waiting.
        assert s.traffic()["round_trips"] - trips == STEPS
        # The server holds the last cache only (the model's own handles aside).
        tensors = [h for h in s.handles() if h["kind"] == "tensor"]
        assert len(tensors) == len(past_names), tensors
        # The same tokens at once: position i's logits are step i's (the causal mask).
        whole = m.run({"input_ids": tokens[None, :].astype(np.int64),
                       **{n: np.zeros((1, 4, 0, 16), np.float32) for n in past_names}}, fetch=["logits"])
        np.testing.assert_allclose(np.stack(step_logits), whole["logits"][0], rtol=1e-4, atol=1e-5)


def test_a_failed_step_loses_nothing(server, decoder):
    with remex.connect(server.address, timeout=60) as s:
        m = s.load(decoder)
        past_names = [i.name for i in m.inputs if i.name.startswith("past_")]
        past = {n: np.zeros((1, 4, 0, 16), np.float32) for n in past_names}
        out = m.run({"input_ids": np.array([[1]], np.int64), **past}, fetch=["logits"])
        past = {n: out["present_" + n[len("past_"):]] for n in past_names}
        before = sorted(h["handle"] for h in s.handles())
        bad = dict(past, past_key_0=np.zeros((1, 4, 5, 16), np.float32))  # a cache of another length
        with pytest.raises(remex.InvalidArgument):
            m.run({"input_ids": np.array([[2]], np.int64), **bad}, fetch=["logits"])
        assert sorted(h["handle"] for h in s.handles()) == before
        out = m.run({"input_ids": np.array([[2]], np.int64), **past}, fetch=["logits"])
        assert out["logits"].shape == (1, 1, 256)


def test_the_cache_grows_in_place_and_an_earlier_cache_stays_as_it_was(server, decoder):
    with remex.connect(server.address, timeout=60) as s:
        m = s.load(decoder)
        past_names = [i.name for i in m.inputs if i.name.startswith("past_")]
        past = {n: np.zeros((1, 4, 0, 16), np.float32) for n in past_names}
        caches = []
        for t in (5, 6, 7):
            out = m.run({"input_ids": np.array([[t]], np.int64), **past}, fetch=["logits"])
            past = {n: out["present_" + n[len("past_"):]] for n in past_names}
            caches.append(past)
        # Each step appended its row to the buffer of the step before: the three steps'
        # key caches of layer 0 are one buffer, which the handles count once.
        keys = [c["past_key_0"] for c in caches]
        held = {h["handle"]: h["held_bytes"] for h in s.handles()}
        assert sum(held[k.handle] > 0 for k in keys) == 1, held
        values = [k.numpy() for k in keys]
        for i, v in enumerate(values):
            assert v.shape == (1, 4, i + 1, 16)
            np.testing.assert_array_equal(v, values[-1][:, :, :i + 1])
        # A step from the first cache again (another continuation): its own buffer, the
        # same logits as a fresh run of those tokens, the later caches untouched.
        out = m.run({"input_ids": np.array([[9]], np.int64), **caches[0]}, fetch=["logits"])
        fresh = m.run({"input_ids": np.array([[5, 9]], np.int64),
                       **{n: np.zeros((1, 4, 0, 16), np.float32) for n in past_names}}, fetch=["logits"])
        np.testing.assert_allclose(out["logits"][0, 0], fresh["logits"][0, 1], rtol=1e-4, atol=1e-5)
        np.testing.assert_array_equal(keys[2].numpy(), values[2])
        assert out["present_key_0"].handle not in held

