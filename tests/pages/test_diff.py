from memories.diff import DiffPiece, has_changes, tokenize, word_diff


def test_it_keeps_the_text_when_tokenizing():
    text = "Alice  moved to\nLisbon, in 2024!"
    assert "".join(tokenize(text)) == text


def test_it_diffs_by_word():
    assert word_diff("Alice prefers aisle seats.", "Alice prefers window seats.") == [
        DiffPiece("equal", "Alice prefers "),
        DiffPiece("delete", "aisle"),
        DiffPiece("insert", "window"),
        DiffPiece("equal", " seats."),
    ]


def test_it_marks_whole_words_not_letters():
    pieces = word_diff("cat", "cart")
    assert pieces == [DiffPiece("delete", "cat"), DiffPiece("insert", "cart")]


def test_it_reports_insertions_and_deletions_at_the_ends():
    assert word_diff("likes tea", "Alice likes tea a lot") == [
        DiffPiece("insert", "Alice "),
        DiffPiece("equal", "likes tea"),
        DiffPiece("insert", " a lot"),
    ]
    assert word_diff("Alice likes tea", "") == [DiffPiece("delete", "Alice likes tea")]


def test_it_knows_when_nothing_changed():
    assert not has_changes(word_diff("Same text.", "Same text."))
    assert has_changes(word_diff("Same text.", "Same text!"))
