import json

import pytest

from infermeter import UserError
from infermeter.models.tokenizer import builtin_tokenizer
from infermeter.workloads import (
    VisionInput,
    WorkloadSpec,
    build_batches,
    builtin_prompts,
    read_prompts_file,
)


@pytest.fixture(scope="module")
def tok():
    return builtin_tokenizer()


@pytest.fixture(scope="module")
def chat_tok():
    t = builtin_tokenizer()
    t.chat_template = (
        "{% for m in messages %}<|bos|>{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}"
        "{% if add_generation_prompt %}assistant:{% endif %}"
    )
    return t


def test_builtin_corpus_has_about_100_varied_prompts():
    prompts = builtin_prompts()
    assert len(prompts) >= 100
    kinds = {p["kind"] for p in prompts}
    assert kinds == {"question", "instruction", "passage"}
    lengths = sorted(len(p["prompt"].split()) for p in prompts)
    assert lengths[0] < 10 and lengths[-1] > 100  # short questions to long passages
    assert len({p["prompt"] for p in prompts}) == len(prompts)


@pytest.mark.parametrize("n", [2, 7, 64, 300, 2500])
def test_exact_prompt_length_in_tokens(tok, n):
    batches = build_batches(tok, WorkloadSpec(batch_size=3, prompt_tokens=n), count=2)
    for b in batches:
        assert b.input_ids.shape == (3, n)
        assert b.attention_mask.all()
        assert b.prompt_tokens == [n, n, n]
    rows = [tuple(r.tolist()) for b in batches for r in b.input_ids]
    if n > 8:
        assert len(set(rows)) == 6  # every row and sample is different text
    assert all(r[0] == tok.bos_token_id for r in rows)


def test_one_token_prompt_leaves_no_room_after_bos(tok):
    with pytest.raises(UserError, match=r"special tokens \(BOS\) take 1") as e:
        build_batches(tok, WorkloadSpec(prompt_tokens=1), count=1)
    assert "--no-chat" not in e.value.fix


def test_exact_length_with_chat_template_counts_the_template(chat_tok):
    (b,) = build_batches(chat_tok, WorkloadSpec(prompt_tokens=50, chat=True), count=1)
    assert b.input_ids.shape == (1, 50)
    text = chat_tok.decode(b.input_ids[0])
    assert text.startswith("<|bos|>user: ") and text.endswith("assistant:")
    with pytest.raises(UserError, match="leaves no room for text"):
        build_batches(chat_tok, WorkloadSpec(prompt_tokens=3, chat=True), count=1)
    (plain,) = build_batches(chat_tok, WorkloadSpec(prompt_tokens=50, chat=False), count=1)
    assert "assistant:" not in chat_tok.decode(plain.input_ids[0])


def test_natural_prompts_are_left_padded(tok):
    spec = WorkloadSpec(batch_size=4, prompts=("Hi.", "A much longer prompt than the first."))
    (b,) = build_batches(tok, spec, count=1)
    lens = b.attention_mask.sum(1).tolist()
    assert lens[0] < lens[1] and b.prompt_tokens == lens
    assert b.attention_mask[0, -1] == 1 and b.attention_mask[0, 0] == 0
    assert b.input_ids[0, 0] == tok.pad_token_id
    assert b.texts[0].endswith("Hi.")


def test_vision_tokens_are_spliced_after_the_prefix(tok):
    v = VisionInput(
        image_size=32, image_token_id=tok.convert_tokens_to_ids("<image>"), tokens_per_image=16
    )
    (b,) = build_batches(tok, WorkloadSpec(batch_size=2, prompt_tokens=20), count=1, vision=v)
    assert b.input_ids.shape == (2, 36) and b.vision_tokens == 16
    assert (b.input_ids[:, 1:17] == v.image_token_id).all()
    assert b.pixel_values.shape == (2, 3, 32, 32)


def test_batch_size_below_one(tok):
    with pytest.raises(UserError, match="batch size 0 is below 1"):
        build_batches(tok, WorkloadSpec(batch_size=0), count=1)


def test_prompt_files(tmp_path):
    txt = tmp_path / "p.txt"
    txt.write_text("first prompt\n\n  second prompt  \n")
    assert read_prompts_file(txt) == ["first prompt", "second prompt"]
    jl = tmp_path / "p.jsonl"
    jl.write_text(json.dumps({"prompt": "one"}) + "\n" + json.dumps({"prompt": "two"}) + "\n")
    assert read_prompts_file(jl) == ["one", "two"]
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"prompt": "ok"}\n{"text": "no"}\n')
    with pytest.raises(UserError, match="line 2 has no string field 'prompt'"):
        read_prompts_file(bad)
    broken = tmp_path / "broken.jsonl"
    broken.write_text("{not json\n")
    with pytest.raises(UserError, match="line 1 is not valid JSON"):
        read_prompts_file(broken)
    with pytest.raises(UserError, match="does not exist"):
        read_prompts_file(tmp_path / "missing.txt")
    empty = tmp_path / "empty.txt"
    empty.write_text("\n\n")
    with pytest.raises(UserError, match="holds no prompts"):
        read_prompts_file(empty)


def test_a_prompts_file_is_read_only_as_far_as_needed(tmp_path):
    many = tmp_path / "many.txt"
    many.write_text("".join(f"prompt number {i}\n" for i in range(1000)))
    assert read_prompts_file(many, max_prompts=3) == [f"prompt number {i}" for i in range(3)]
    text = read_prompts_file(many, enough_chars=40)
    assert sum(map(len, text)) == 40 and text[0] == "prompt number 0"  # the last one cut
    assert read_prompts_file(many, max_prompts=10, max_prompt_chars=15)[-1] == "prompt number 9"
    with pytest.raises(UserError, match="line 11: a prompt of 16 characters cannot fit"):
        read_prompts_file(many, max_prompt_chars=15)  # "prompt number 10" is one too long
    broken_late = tmp_path / "late.jsonl"
    broken_late.write_text('{"prompt": "ok"}\n' * 5 + "{not json\n")
    assert read_prompts_file(broken_late, max_prompts=2) == ["ok", "ok"]  # never read that far


def test_a_10_mb_prompts_file_costs_little_before_a_profile_refuses_or_runs_it(
    tiny_llama, tmp_path, monkeypatch
):
    """Issue 14: a 10 MB file cost 27 s and 2.3 GB of tokenizing before being refused.

    Judged by what is tokenized (a counter), not by the clock: the refusal tokenizes nothing,
    and the run tokenizes windows of the text, never the whole file.
    """
    from infermeter import RunConfig, profile
    from infermeter.workloads import prompts as prompts_mod

    encoded_chars: list[int] = []
    real_encode = prompts_mod._encode

    def counting_encode(tokenizer, text):
        encoded_chars.append(len(text))
        return real_encode(tokenizer, text)

    monkeypatch.setattr(prompts_mod, "_encode", counting_encode)
    monkeypatch.setattr(prompts_mod, "_CORPUS_CACHE", {})
    huge = tmp_path / "huge.txt"
    huge.write_text(("word " * 2_000_000) + "\nshort prompt\n")  # one 10 MB line first
    config = RunConfig(
        model="tiny-llama", prompts_file=str(huge), new_tokens=2, samples=1, energy="off"
    )
    with pytest.raises(UserError, match="line 1: a prompt of 9,999,999 characters"):
        profile(config, loaded=tiny_llama)
    assert encoded_chars == []  # refused before anything was tokenized
    exact = RunConfig(
        model="tiny-llama",
        prompts_file=str(huge),
        prompt_tokens=32,
        new_tokens=2,
        samples=2,
        energy="off",
    )
    run = profile(exact, loaded=tiny_llama)  # windows of the text: only what they need is read
    assert encoded_chars, "the counter saw no tokenizing: it no longer watches the right call"
    assert sum(encoded_chars) < 100_000  # of 10,000,000 in the file (64 Ki is read)
    assert [s.prompt_tokens for s in run.samples] == [32, 32, 32]
