"""Sentence-aware chunking by characters, Chinese and English."""

from pipelines.retrieval.chunking import chunk_text, split_sentences


def test_split_sentences_chinese_keeps_punctuation_and_quotes():
    text = "老师问：“你懂了吗？”学生说懂了。我们继续；下一题！还有最后一句"
    assert split_sentences(text) == ["老师问：“你懂了吗？”", "学生说懂了。", "我们继续；", "下一题！", "还有最后一句"]


def test_split_sentences_english_skips_abbreviations_and_splits_paragraphs():
    text = 'Mr. Lee asks a question. "Why?" He smiles! Is it 2.5? Yes; it is.\n\nNew paragraph'
    assert split_sentences(text) == [
        "Mr. Lee asks a question. ",
        '"Why?" ',
        "He smiles! ",
        "Is it 2.5? ",
        "Yes; ",
        "it is.\n\n",
        "New paragraph",
    ]
    assert "".join(split_sentences(text)) == text


def test_chinese_chunks_respect_size_and_overlap_whole_sentences():
    sentences = [f"这是第{i}个句子内容。" for i in range(10)]  # 9-10 characters each
    chunks = chunk_text("".join(sentences), size=40, overlap=12, min_length=5)
    assert all(len(c) <= 40 for c in chunks)
    assert chunks[0] == "".join(sentences[:4])
    # the next chunk starts with the last whole sentence of the previous one (fits in 12 characters)
    assert chunks[1].startswith(sentences[3])
    assert all(s in "".join(chunks) for s in sentences)


def test_english_chunks_and_min_length():
    text = "One two three four. Five six seven eight. Nine ten. Ok."
    chunks = chunk_text(text, size=41, overlap=0, min_length=5)
    assert chunks == ["One two three four. Five six seven eight.", "Nine ten. Ok."]
    assert chunk_text(text, size=41, overlap=0, min_length=20) == ["One two three four. Five six seven eight."]


def test_overlong_sentence_is_cut_into_overlapping_windows():
    chunks = chunk_text("字" * 100 + "。", size=40, overlap=10, min_length=1)
    assert [len(c) for c in chunks] == [40, 40, 40, 11]
    assert "".join(c[10:] if i else c for i, c in enumerate(chunks)) == "字" * 100 + "。"


def test_a_run_of_terminators_is_one_boundary_and_ellipses_end_sentences():
    assert split_sentences("你好吗？！我很好……真的吗…是的。") == ["你好吗？！", "我很好……", "真的吗…", "是的。"]
    assert split_sentences("Really?! Yes... ok") == ["Really?! ", "Yes... ", "ok"]


def test_line_breaks_end_utterances_of_dialogue_sources_only():
    text = "老师：今天学分数\n学生：好的\n老师：先折纸"
    assert split_sentences(text, line_breaks=True) == ["老师：今天学分数\n", "学生：好的\n", "老师：先折纸"]
    assert split_sentences(text) == [text]
    assert chunk_text(text, size=20, overlap=0, min_length=1, line_breaks=True) == [
        "老师：今天学分数\n学生：好的",
        "老师：先折纸",
    ]


def test_initials_are_kept_but_a_capital_after_a_lower_case_word_ends_a_sentence():
    text = "They work in group A. Then they swap. John F. Kennedy spoke. J. K. Rowling wrote."
    assert split_sentences(text) == [
        "They work in group A. ",
        "Then they swap. ",
        "John F. Kennedy spoke. ",
        "J. K. Rowling wrote.",
    ]


def test_anchor_boundaries_never_drop_text_or_exceed_the_size():
    sentences = [f"Line {i} says {'x' * (i % 9)}. " for i in range(80)]
    text = "".join(sentences)
    chunks = chunk_text(text, size=60, overlap=0, min_length=1)
    assert all(len(c) <= 60 for c in chunks)
    assert " ".join(chunks).split() == text.split()
