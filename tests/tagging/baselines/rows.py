"""Rows the baselines' tests share: a combinations definition and four evaluated questions, two of it."""

from pipelines.tagging.data import TaggingExample

DEF = "Counting combinations: how many different outfits can be made from shirts and trousers."


def ex(i, question, label, kid="comb", definition=DEF):
    return TaggingExample(f"e{i}", kid, definition, question, label)


EVAL = [
    ex(0, "Lily has 3 shirts and 4 pairs of trousers. How many different outfits can she make?", 1),
    ex(1, "A train travels 120 km in the morning and 80 km in the afternoon. How far does it go?", 0),
    ex(2, "Tom has 2 hats and 5 scarves. How many different hat-and-scarf outfits are possible?", 1),
    ex(3, "The temperature dropped from 12 degrees to 3 degrees. By how much did it fall?", 0),
]
