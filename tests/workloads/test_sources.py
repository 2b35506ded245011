"""`--workload` and `--dataset` as the prompts of profile, sweep, experiment and
systems-analysis (issue 33, item 6): texts read back from the files and data sets they name."""

from __future__ import annotations

import json
import shutil

import pytest
from typer.testing import CliRunner

from infermeter.cli.app import app
from infermeter.errors import UserError
from infermeter.workloads.sources import dataset_texts, prompt_texts, workload_texts
from infermeter.workloads.traffic import resolve
from tests.helpers import assert_one_line_error

datasets = pytest.importorskip("datasets", reason="--dataset needs infermeter[datasets]")
runner = CliRunner()
ROWS = [
    "",
    " = Valkyria Chronicles III = ",
    "The museum opened at nine, and the line was long.",
    "Rain fell on the harbour all night; by morning the boats were gone.",
]


def test_a_workloads_prompts_are_each_conversations_first_user_turn():
    records = json.loads(resolve("sharegpt-sample")[1].read_text())
    assert workload_texts("sharegpt-sample") == [r["conversations"][0]["value"] for r in records]
    with pytest.raises(UserError, match="holds lengths and arrival times"):
        workload_texts("mooncake-sample")


def test_a_saved_folder_and_a_file_give_their_text_column(tmp_path):
    datasets.DatasetDict(
        {
            "train": datasets.Dataset.from_dict({"id": [1, 2, 3, 4], "text": ROWS}),
            "test": datasets.Dataset.from_dict({"id": [5], "text": ["Held-out text, one row."]}),
        }
    ).save_to_disk(str(tmp_path / "saved"))
    # empty rows and wikitext headings dropped; the test split first
    assert dataset_texts(str(tmp_path / "saved")) == ["Held-out text, one row."]
    assert dataset_texts(str(tmp_path / "saved"), split="train") == ROWS[2:]
    f = tmp_path / "q.jsonl"
    f.write_text(
        "".join(
            json.dumps({"n": i, "question": q}) + "\n"
            for i, q in enumerate(["What is a KV cache?", "Why batch requests?"])
        )
    )
    assert dataset_texts(str(f)) == ["What is a KV cache?", "Why batch requests?"]
    with pytest.raises(UserError, match="no column 'body'"):
        dataset_texts(str(f), field="body")
    with pytest.raises(UserError, match="no split 'dev'"):
        dataset_texts(str(tmp_path / "saved"), split="dev")


@pytest.mark.parametrize(
    ("name", "content", "needle"),
    [
        ("broken.jsonl", b'{"text": "fine"}\n{"text": \n', "not a readable .jsonl file"),
        ("mixed.json", b'[{"text": "a"}, {"text": {"nested": [1, 2]}}]', "no text column"),
        ("ragged.csv", b'text,n\n"one",1\n"two",2,3,4\n', "not a readable .csv file"),
        ("binary.parquet", bytes(range(256)) * 8, "not a readable .parquet file"),
    ],
)
def test_a_broken_data_file_is_one_line_naming_it(name, content, needle, tmp_path, capfd):
    """Issue 58: four broken `--dataset` files each ended in "internal error" (the parse
    error of `datasets`' builder escaped); each is now a refusal naming the file, and the
    library logs nothing of its own beside it."""
    f = tmp_path / name
    f.write_bytes(content)
    with pytest.raises(UserError, match=needle) as caught:
        dataset_texts(str(f))
    assert "\n" not in str(caught.value) and name in str(caught.value)
    assert capfd.readouterr().err == ""


def test_a_hub_data_set_is_read_from_the_local_cache_offline(tmp_path, monkeypatch):
    """`--dataset wikitext` as the reference ran it: the cache laid out as `datasets` writes a
    download of wikitext-2-raw-v1, read with the network off."""
    import pandas as pd

    pd.DataFrame({"text": ROWS}).to_parquet(tmp_path / "t.parquet")
    built = tmp_path / "built"
    datasets.load_dataset(
        "parquet", data_files={"test": str(tmp_path / "t.parquet")}, cache_dir=str(built)
    )
    (src,) = built.glob("parquet/*/0.0.0/*/dataset_info.json")
    cache = tmp_path / "cache"
    dst = cache / "wikitext" / "wikitext-2-raw-v1" / "0.0.0" / "0123abcd"
    dst.mkdir(parents=True)
    info = json.loads(src.read_text())
    info.update(builder_name="wikitext", config_name="wikitext-2-raw-v1", dataset_name="wikitext")
    (dst / "dataset_info.json").write_text(json.dumps(info))
    shutil.copy(src.parent / "parquet-test.arrow", dst / "wikitext-test.arrow")
    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", cache)
    texts, source = prompt_texts(None, "wikitext")
    assert list(texts) == ROWS[2:] and source == "dataset wikitext"
    with pytest.raises(UserError, match="not a folder, a file, or a data set in the local cache"):
        dataset_texts("no-such/dataset")


def test_profile_runs_on_a_workloads_prompts_and_records_where_they_came_from(tmp_path):
    r = runner.invoke(
        app,
        [
            "profile",
            "--workload",
            "chat-sample",
            "--samples",
            "1",
            "--new-tokens",
            "2",
            "--json",
            "--db",
            str(tmp_path / "r.db"),
        ],
    )
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert doc["meta"]["config"]["prompts_source"] == "workload chat-sample"
    first_turns = [
        json.loads(x)["messages"][0]["content"]
        for x in resolve("chat-sample")[1].read_text().splitlines()
    ]
    assert doc["meta"]["config"]["prompts_count"] == len(first_turns)


def test_sweep_takes_a_dataset(tmp_path):
    datasets.Dataset.from_dict({"text": ROWS}).save_to_disk(str(tmp_path / "d"))
    r = runner.invoke(
        app,
        [
            "sweep",
            "-k",
            "new_tokens=1,2",
            "--samples",
            "1",
            "--warmup",
            "0",
            "--dataset",
            str(tmp_path / "d"),
            "--json",
            "--db",
            str(tmp_path / "r.db"),
        ],
    )
    assert r.exit_code == 0, r.output
    from infermeter import Store

    runs = Store(str(tmp_path / "r.db")).list_runs()
    assert len(runs) == 2
    config = Store(str(tmp_path / "r.db")).get(runs[0]["id"]).config
    assert config["prompts_source"] == f"dataset {tmp_path / 'd'}" and config["prompts_count"] == 2


@pytest.mark.parametrize(
    "command",
    [
        ["profile"],
        ["sweep", "-k", "new_tokens=1"],
        ["experiment", "batch"],
        ["systems-analysis", "--variant", "top_k=1"],
    ],
)
@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--workload", "chat-sample", "--dataset", "x"], "not both"),
        (["--dataset-split", "test"], "choose within a --dataset"),
        (["--workload", "azure-sample"], "holds lengths and arrival times"),
        (
            ["--dataset", "no-such/dataset"],
            "not a folder, a file, or a data set in the local cache",
        ),
    ],
)
def test_every_command_refuses_bad_prompt_sources_in_one_line(command, args, needle, tmp_path):
    r = runner.invoke(
        app,
        [
            *command,
            *args,
            "--db",
            str(tmp_path / "r.db"),
            *(
                ["--out", str(tmp_path / "o")]
                if command[0] in ("experiment", "systems-analysis")
                else []
            ),
        ],
    )
    assert_one_line_error(r, needle)
