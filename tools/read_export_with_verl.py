"""Read an ``agentunit-gym export`` file with verl's own dataset class, as a verl run would.

verl is not a dependency of this project (it needs torch), so this runs in an environment of
its own and imports nothing of agentunit-gym. Two steps:

1. In the project's environment, a run and its export::

       agentunit-gym eval --env DB-v0 --env KG-v0 --backend sqlite --backend embedded --agent oracle \\
           -n 3 --output results/verl-check
       agentunit-gym export results/verl-check --output rows.parquet --style tools

2. In an environment with verl (checked with verl 0.9.1 and torch 2.13 CPU: ``pip install torch
   --index-url https://download.pytorch.org/whl/cpu``, ``pip install --no-deps verl``, then
   ``pip install ray datasets omegaconf pillow "transformers>=5.5.3,<5.11" "tensordict>=0.8,<=0.10"``)::

       python tools/read_export_with_verl.py rows.parquet

It builds ``verl.utils.dataset.rl_dataset.RLHFDataset`` over the file with a word-level
tokenizer made here (no model is downloaded; the chat template only has to render the
messages), prints what each row gives verl's agent loop (``agent_name``, ``index``,
``reward_model``, ``tools_kwargs``, ``interaction_kwargs``, the prompt's roles) and collates
the rows into one batch as verl's dataloader does. docs/training.md ("Reading rows with
verl") shows its output and what it does not test.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

CHAT_TEMPLATE = ("{% for m in messages %}<{{ m['role'] }}> {{ m['content'] }}\n{% endfor %}"
                 "{% if add_generation_prompt %}<assistant>{% endif %}")


def word_tokenizer() -> Any:
    """A tokenizer with a chat template and no vocabulary to speak of: enough for the dataset's
    prompt-length filter, which is all it tokenizes."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    words = Tokenizer(models.WordLevel({"[UNK]": 0, "[PAD]": 1}, unk_token="[UNK]"))
    words.pre_tokenizer = pre_tokenizers.Whitespace()
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=words, unk_token="[UNK]", pad_token="[PAD]")
    tokenizer.chat_template = CHAT_TEMPLATE
    return tokenizer


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("rows", help="the exported .parquet (or .jsonl) file")
    parser.add_argument("--cache-dir", default=None, help="verl's dataset cache (default: its own)")
    args = parser.parse_args(argv)

    from verl.utils.dataset.rl_dataset import RLHFDataset, collate_fn

    config: dict[str, Any] = {"max_prompt_length": 1_000_000, "filter_overlong_prompts": True}
    if args.cache_dir:
        config["cache_dir"] = args.cache_dir
    dataset = RLHFDataset(data_files=args.rows, tokenizer=word_tokenizer(), config=config)
    for position in range(len(dataset)):
        row = dataset[position]
        shown = {key: row[key] for key in ("data_source", "agent_name", "index", "reward_model")}
        shown["tools_kwargs"] = {name: kwargs for name, kwargs in row["tools_kwargs"].items() if kwargs is not None}
        shown["interaction_kwargs"] = row["interaction_kwargs"]
        shown["extra_info.tool_selection"] = row["extra_info"]["tool_selection"]
        shown["raw_prompt roles"] = [message["role"] for message in row["raw_prompt"]]
        print(json.dumps(shown, default=str))
    batch = collate_fn([dataset[position] for position in range(len(dataset))])
    print(json.dumps({"batch agent_name": [str(name) for name in batch["agent_name"]],
                      "batch index": [int(i) for i in batch["index"]]}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
