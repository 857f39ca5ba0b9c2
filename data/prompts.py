"""What prompt a problem becomes: a template, then the model's chat template if it has one.

    text = template with {problem} replaced          data.template: a name below, or a file
    prompt = tokenizer.apply_chat_template(          data.chat_template: auto (when the tokenizer
        [system?, user: text], add_generation_prompt)   has one), on, off; data.system_prompt
           or text as is, for a model without one

The feeder sends `prompt`; the generator tokenizes it as plain text, so a leading BOS that
the chat template writes is dropped when the tokenizer adds one of its own (no double BOS).
DeRL's diversifying prompts replace `text` and go through the same chat template.

Named templates:
- bare: the problem and a newline, what the tiny model was trained on (the embedded
  synthetic task's prompt, unchanged);
- boxed: the problem and a plain instruction to put the final answer in \\boxed{};
- jury-rl: JURY-RL's training prompt. The paper (§5.4 of the readings) gives no text of its
  own: it uses each model's official chat format and trains with VeRL, whose MATH recipe
  appends "Let's think step by step and output the final answer within \\boxed{}." to the
  problem; that is this template, meant with data.chat_template on;
- derl, derl-lean: DeRL's original RL prompts (§3.1; data/templates/derl_original.txt and
  derl_lean_original.txt, the Lean statement as {problem}).
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from jury.data.problems import PROMPT_SUFFIX, DataError
from jury.protocol.config import DataConfig
from jury.protocol.prompt_files import read_prompt_file

TEMPLATE_DIR = Path(__file__).parent / "templates"

PLACEHOLDER = "{problem}"

_TEMPLATES = {
    "bare": lambda: PLACEHOLDER + PROMPT_SUFFIX,
    "boxed": lambda: PLACEHOLDER + "\nPut your final answer in \\boxed{}.\n",
    "jury-rl": lambda: PLACEHOLDER + " Let's think step by step and output the final answer within \\boxed{}.",
    "derl": lambda: load_template("derl_original"),
    "derl-lean": lambda: load_template("derl_lean_original").replace("{statement}", PLACEHOLDER),
}
NAMES = tuple(_TEMPLATES)


def load_template(name: str) -> str:
    """The text of templates/<name>.txt (a training prompt of a paper) without its `#` citation lines."""
    return read_prompt_file(TEMPLATE_DIR / f"{name}.txt")


@dataclass(frozen=True)
class Template:
    source: str  # the name, or the file it was read from
    text: str    # with {problem} where the problem goes

    def fill(self, problem: str) -> str:
        # one pass, never str.format: templates carry LaTeX braces and problems may hold "{problem}"
        return self.text.replace(PLACEHOLDER, problem)


def resolve_template(spec: str) -> Template:
    """A named template, or a UTF-8 file with {problem} in it (its text is used as is)."""
    if spec in _TEMPLATES:
        return Template(spec, _TEMPLATES[spec]())
    path = Path(spec)
    if not path.is_file():
        raise DataError(f"data.template: {spec!r} is neither a named template ({', '.join(NAMES)}) nor a file")
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as e:
        raise DataError(f"data.template: {spec}: not UTF-8 (byte {e.start})") from None
    if PLACEHOLDER not in text:
        raise DataError(f"data.template: {spec} has no {PLACEHOLDER} placeholder where the problem goes")
    return Template(str(path), text)


class PromptFormat:
    """problem -> the prompt text the generator receives."""

    def __init__(self, template: Template, tokenizer=None, *, chat: bool = False, system_prompt: str = ""):
        if chat and not getattr(tokenizer, "chat_template", None):
            raise DataError("a chat prompt needs a tokenizer with a chat template")
        if system_prompt and not chat:
            raise DataError("data.system_prompt needs a chat template: the tokenizer has none, "
                            "or data.chat_template is off")
        self.template, self.tokenizer, self.chat, self.system_prompt = template, tokenizer, chat, system_prompt
        self.drop_bos = chat and _adds_bos(tokenizer)

    @classmethod
    def from_config(cls, data: DataConfig, tokenizer=None, model: str = "the model") -> "PromptFormat":
        has = bool(getattr(tokenizer, "chat_template", None))
        if data.chat_template is True and not has:
            raise DataError(f"data.chat_template is on, but the tokenizer of {model} has no chat template")
        chat = has if data.chat_template == "auto" else data.chat_template
        return cls(resolve_template(data.template), tokenizer, chat=chat, system_prompt=data.system_prompt)

    def text(self, problem: str) -> str:
        """The template filled: the user's message (what DeRL's mixer may replace)."""
        return self.template.fill(problem)

    def wrap(self, text: str) -> str:
        """The message through the chat template, or as is."""
        if not self.chat:
            return text
        messages = [{"role": "system", "content": self.system_prompt}] if self.system_prompt else []
        messages.append({"role": "user", "content": text})
        out = self.tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
        bos = self.tokenizer.bos_token
        return out[len(bos):] if self.drop_bos and out.startswith(bos) else out

    def render(self, problem: str) -> str:
        return self.wrap(self.text(problem))

    def describe(self) -> str:
        system = f", system prompt {self.system_prompt!r}" if self.system_prompt else ""
        return f"template {self.template.source}, {'through the chat template' if self.chat else 'no chat template'}{system}"


def _adds_bos(tokenizer) -> bool:
    """Whether tokenizing plain text already puts BOS first (then the chat template's must go)."""
    bos = getattr(tokenizer, "bos_token_id", None)
    if bos is None:
        return False
    ids = tokenizer("a")["input_ids"]
    return bool(ids) and ids[0] == bos
