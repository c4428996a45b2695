"""BGE-M3 (FlagEmbedding) and the cross-encoder reranker (FlagReranker), on tiny random models saved
locally: the values FlagEmbedding returns are checked against the definitions computed directly
with transformers, and both plug into the build and the retriever."""

import asyncio
from pathlib import Path

import numpy as np
import pytest
import torch

from pipelines.retrieval.build import build_knowledge_base
from pipelines.retrieval.config import EmbedderConfig, RerankConfig, RetrievalConfig
from pipelines.retrieval.embedders import BGEM3Embedder, lexical_score
from pipelines.retrieval.rerank import CrossEncoderReranker
from pipelines.retrieval.retriever import Retriever
from pipelines.retrieval.store import KnowledgeStore
from tests.retrieval.conftest import HashEmbedder
from tests.tiny_models import minilm_dir


@pytest.fixture(scope="module")
def tiny_bge_m3(tmp_path_factory) -> Path:
    """A random 2-layer XLM-RoBERTa on the MiniLM tokenizer, with BGE-M3's sparse/colbert heads."""
    from transformers import AutoTokenizer, XLMRobertaConfig, XLMRobertaModel

    path = tmp_path_factory.mktemp("tiny_bge_m3")
    tokenizer = AutoTokenizer.from_pretrained(str(minilm_dir()))
    torch.manual_seed(0)
    config = XLMRobertaConfig(
        vocab_size=len(tokenizer),
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=130,
        pad_token_id=tokenizer.pad_token_id,
    )
    XLMRobertaModel(config).save_pretrained(path)
    tokenizer.save_pretrained(path)
    torch.save(torch.nn.Linear(32, 1).state_dict(), path / "sparse_linear.pt")
    torch.save(torch.nn.Linear(32, 32).state_dict(), path / "colbert_linear.pt")
    return path


@pytest.fixture(scope="module")
def tiny_cross_encoder(tmp_path_factory) -> Path:
    from transformers import AutoTokenizer, BertConfig, BertForSequenceClassification

    path = tmp_path_factory.mktemp("tiny_reranker")
    tokenizer = AutoTokenizer.from_pretrained(str(minilm_dir()))
    torch.manual_seed(1)
    config = BertConfig(
        vocab_size=len(tokenizer),
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        num_labels=1,
    )
    BertForSequenceClassification(config).save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


def test_bge_m3_dense_and_sparse_match_their_definitions(tiny_bge_m3):
    from transformers import AutoModel, AutoTokenizer

    embedder = BGEM3Embedder(EmbedderConfig(kind="bge_m3", path=str(tiny_bge_m3), max_length=64, sparse=True))
    texts = ["teachers ask open questions", "students feel anxious before exams"]
    encoded = embedder.encode_documents(texts)
    tokenizer = AutoTokenizer.from_pretrained(str(tiny_bge_m3))
    model = AutoModel.from_pretrained(str(tiny_bge_m3)).eval()
    linear = torch.nn.Linear(32, 1)
    linear.load_state_dict(torch.load(tiny_bge_m3 / "sparse_linear.pt"))
    with torch.no_grad():
        batch = tokenizer(texts, padding=True, return_tensors="pt")
        hidden = model(**batch).last_hidden_state
        cls = torch.nn.functional.normalize(hidden[:, 0], dim=-1).numpy()
        weights = torch.relu(linear(hidden)).squeeze(-1)
    np.testing.assert_allclose(encoded.dense, cls, atol=1e-5)
    assert encoded.dense.shape == (2, 32) and embedder.identity.startswith("bge_m3:")
    # BGE-M3 drops the CLS, EOS, PAD and UNK tokens (the MiniLM tokenizer has no EOS, so [SEP] stays)
    special = {tokenizer.cls_token_id, tokenizer.eos_token_id, tokenizer.pad_token_id, tokenizer.unk_token_id}
    expected: dict[str, float] = {}
    for token, weight in zip(batch["input_ids"][0].tolist(), weights[0].tolist(), strict=True):
        if token not in special and weight > 0:
            expected[str(token)] = max(expected.get(str(token), 0.0), weight)
    assert encoded.sparse[0].keys() == expected.keys()
    assert encoded.sparse[0] == pytest.approx(expected, abs=1e-5)
    assert lexical_score(encoded.sparse[0], encoded.sparse[0]) == pytest.approx(sum(w * w for w in expected.values()))


def test_bge_m3_build_and_hybrid_retrieval(tiny_bge_m3, corpus, groups):
    root, cfg = corpus
    cfg = cfg.model_copy(update={"embedder": EmbedderConfig(kind="bge_m3", path=str(tiny_bge_m3), sparse=True)})
    embedder = BGEM3Embedder(cfg.embedder)
    metrics = build_knowledge_base(cfg, groups, root=root, embedder=embedder, progress=False)
    assert metrics["embedded"] == metrics["chunks"] and metrics["embedder"] == embedder.identity
    retriever = Retriever(KnowledgeStore(root / "kb"), embedder, RetrievalConfig(sparse_weight=0.5))
    hits = retriever.dense("Test anxiety makes the mind go blank", group="psychologist", top_k=3)
    assert hits and all("sparse" in h.scores for h in hits)
    combined = [h.scores["dense"] + 0.5 * h.scores["sparse"] for h in hits]
    assert combined == sorted(combined, reverse=True)
    assert max(h.scores["sparse"] for h in hits) > 0


def test_reranker_scores_are_sigmoid_logits_and_order_results(tiny_cross_encoder, corpus, groups):
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    root, cfg = corpus
    build_knowledge_base(cfg, groups, root=root, embedder=HashEmbedder(), progress=False)
    reranker = CrossEncoderReranker(RerankConfig(enabled=True, model=str(tiny_cross_encoder), max_length=64))
    retrieval = RetrievalConfig(rerank=RerankConfig(enabled=True, model=str(tiny_cross_encoder), candidates=4))
    retriever = Retriever(KnowledgeStore(root / "kb"), HashEmbedder(), retrieval, reranker=reranker)
    query = "how should a teacher ask questions"
    hits = asyncio.run(retriever.retrieve(query, top_k=3))
    assert len(hits) == 3
    scores = [h.scores["rerank"] for h in hits]
    assert scores == sorted(scores, reverse=True)
    tokenizer = AutoTokenizer.from_pretrained(str(tiny_cross_encoder))
    model = AutoModelForSequenceClassification.from_pretrained(str(tiny_cross_encoder)).eval()
    with torch.no_grad():
        batch = tokenizer([query] * 3, [h.text for h in hits], padding=True, truncation=True, return_tensors="pt")
        expected = torch.sigmoid(model(**batch).logits.view(-1)).tolist()
    assert scores == pytest.approx(expected, abs=1e-5)


def test_missing_model_folders_say_what_to_do(tmp_path):
    with pytest.raises(FileNotFoundError, match="set retrieval.rerank.model to a local cross-encoder"):
        CrossEncoderReranker(RerankConfig(enabled=True, model=str(tmp_path / "none")))
    with pytest.raises(FileNotFoundError, match="never downloaded at run time"):
        BGEM3Embedder(EmbedderConfig(kind="bge_m3", path=str(tmp_path / "none")))


def test_embedder_identity_fingerprints_the_weights_and_names_dtype_and_length(tmp_path, minilm):
    from pipelines.models.fingerprint import folder_fingerprint
    from pipelines.retrieval.embedders import model_identity
    from tests.tiny_models import minilm_dir

    assert minilm.identity.endswith(f":{folder_fingerprint(minilm_dir().resolve())[:16]}:float32:len256")
    folder = tmp_path / "models" / "embedder"
    folder.mkdir(parents=True)
    (folder / "config.json").write_text('{"hidden_size": 8}')
    (folder / "model.safetensors").write_bytes(b"\x00" * 4096)
    first = model_identity("sentence_transformers", folder, dtype="float32", max_length=256)
    (folder / "model.safetensors").write_bytes(b"\x01" * 4096)  # new weights, same folder and size
    second = model_identity("sentence_transformers", folder, dtype="float32", max_length=256)
    assert first != second and first.startswith("sentence_transformers:models/embedder:")
    assert model_identity("bge_m3", folder, dtype="float16", max_length=512) != model_identity(
        "bge_m3", folder, dtype="float32", max_length=512
    )
