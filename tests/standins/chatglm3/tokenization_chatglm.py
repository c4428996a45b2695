"""Stand-in for chatglm3-6b's remote ``tokenization_chatglm.py`` (2024 revision), written for edumas tests.

Same interface and traits: a sentencepiece model (``tokenizer.model``) whose ids come first, then the
special tokens ``[MASK] [gMASK] [sMASK] sop eop <|system|> <|user|> <|assistant|> <|observation|>``
appended after them; ``get_command``, ``build_single_message``, ``build_chat_input``; read-only
``pad_token``/``eos_token`` properties (``<unk>`` id 0, ``</s>`` id 2); special tokens written as text are
split as text; ``_pad`` has no ``padding_side`` argument and asserts left padding.
"""

import os

from sentencepiece import SentencePieceProcessor
from transformers import PreTrainedTokenizer
from transformers.utils import PaddingStrategy

SPECIAL_TOKENS = ["[MASK]", "[gMASK]", "[sMASK]", "sop", "eop", "<|system|>", "<|user|>", "<|assistant|>",
                  "<|observation|>"]  # fmt: skip


class SPTokenizer:
    def __init__(self, model_path):
        self.sp_model = SentencePieceProcessor(model_file=model_path)
        self.n_words = self.sp_model.vocab_size()
        self.bos_id, self.eos_id, self.pad_id = self.sp_model.bos_id(), self.sp_model.eos_id(), self.sp_model.unk_id()
        self.special_tokens = {token: self.n_words + i for i, token in enumerate(SPECIAL_TOKENS)}
        self.index_special_tokens = {i: token for token, i in self.special_tokens.items()}
        self.n_words += len(SPECIAL_TOKENS)

    def tokenize(self, text):
        return self.sp_model.EncodeAsPieces(text)

    def encode(self, text):
        return self.sp_model.encode(text)

    def decode(self, ids):
        text, buffer = "", []
        for token in ids:
            if token in self.index_special_tokens:
                text += self.sp_model.decode(buffer) + self.index_special_tokens[token]
                buffer = []
            else:
                buffer.append(token)
        return text + self.sp_model.decode(buffer)

    def convert_token_to_id(self, token):
        return self.special_tokens.get(token, self.sp_model.PieceToId(token))

    def convert_id_to_token(self, index):
        if index in self.index_special_tokens:
            return self.index_special_tokens[index]
        if index in (self.eos_id, self.bos_id, self.pad_id) or index < 0:
            return ""
        return self.sp_model.IdToPiece(index)


class ChatGLMTokenizer(PreTrainedTokenizer):
    vocab_files_names = {"vocab_file": "tokenizer.model"}
    model_input_names = ["input_ids", "attention_mask", "position_ids"]

    def __init__(self, vocab_file, padding_side="left", clean_up_tokenization_spaces=False, **kwargs):
        self.name = "GLMTokenizer"
        self.vocab_file = vocab_file
        self.tokenizer = SPTokenizer(vocab_file)
        self.special_tokens = {"<bos>": self.tokenizer.bos_id, "<eos>": self.tokenizer.eos_id,
                               "<pad>": self.tokenizer.pad_id}  # fmt: skip
        super().__init__(padding_side=padding_side, clean_up_tokenization_spaces=clean_up_tokenization_spaces, **kwargs)

    def get_command(self, token):
        if token in self.special_tokens:
            return self.special_tokens[token]
        assert token in self.tokenizer.special_tokens, f"{token} is not a special token for {self.name}"
        return self.tokenizer.special_tokens[token]

    @property
    def unk_token(self):
        return "<unk>"

    @property
    def pad_token(self):
        return "<unk>"

    @property
    def pad_token_id(self):
        return self.get_command("<pad>")

    @property
    def eos_token(self):
        return "</s>"

    @property
    def eos_token_id(self):
        return self.get_command("<eos>")

    @property
    def vocab_size(self):
        return self.tokenizer.n_words

    def get_vocab(self):
        vocab = {self._convert_id_to_token(i): i for i in range(self.vocab_size)}
        vocab.update(self.added_tokens_encoder)
        return vocab

    def _tokenize(self, text, **kwargs):
        return self.tokenizer.tokenize(text)

    def _convert_token_to_id(self, token):
        return self.tokenizer.convert_token_to_id(token)

    def _convert_id_to_token(self, index):
        return self.tokenizer.convert_id_to_token(index)

    def convert_tokens_to_string(self, tokens):
        return self.tokenizer.sp_model.DecodePieces(tokens)

    def save_vocabulary(self, save_directory, filename_prefix=None):
        target = os.path.join(save_directory, self.vocab_files_names["vocab_file"])
        with open(self.vocab_file, "rb") as source, open(target, "wb") as sink:
            sink.write(source.read())
        return (target,)

    def get_prefix_tokens(self):
        return [self.get_command("[gMASK]"), self.get_command("sop")]

    def build_single_message(self, role, metadata, message):
        assert role in ["system", "user", "assistant", "observation"], role
        role_tokens = [self.get_command(f"<|{role}|>")] + self.tokenizer.encode(f"{metadata}\n")
        return role_tokens + self.tokenizer.encode(message)

    def build_chat_input(self, query, history=None, role="user"):
        input_ids = []
        for item in history or []:
            input_ids.extend(self.build_single_message(item["role"], item.get("metadata", ""), item["content"]))
        input_ids.extend(self.build_single_message(role, "", query))
        input_ids.extend([self.get_command("<|assistant|>")])
        return self.batch_encode_plus([input_ids], return_tensors="pt", is_split_into_words=True)

    def build_inputs_with_special_tokens(self, token_ids_0, token_ids_1=None):
        token_ids_0 = self.get_prefix_tokens() + token_ids_0
        if token_ids_1 is not None:
            token_ids_0 = token_ids_0 + token_ids_1 + [self.get_command("<eos>")]
        return token_ids_0

    def _pad(self, encoded_inputs, max_length=None, padding_strategy=PaddingStrategy.DO_NOT_PAD,
             pad_to_multiple_of=None, return_attention_mask=None):  # fmt: skip
        assert self.padding_side == "left"
        required = encoded_inputs[self.model_input_names[0]]
        seq_length = len(required)
        if padding_strategy == PaddingStrategy.LONGEST:
            max_length = seq_length
        if max_length is not None and pad_to_multiple_of is not None and max_length % pad_to_multiple_of:
            max_length = (max_length // pad_to_multiple_of + 1) * pad_to_multiple_of
        encoded_inputs.setdefault("attention_mask", [1] * seq_length)
        encoded_inputs.setdefault("position_ids", list(range(seq_length)))
        if padding_strategy != PaddingStrategy.DO_NOT_PAD and seq_length != max_length:
            difference = max_length - seq_length
            encoded_inputs["attention_mask"] = [0] * difference + encoded_inputs["attention_mask"]
            encoded_inputs["position_ids"] = [0] * difference + encoded_inputs["position_ids"]
            encoded_inputs[self.model_input_names[0]] = [self.pad_token_id] * difference + required
        return encoded_inputs
