"""Write the tagging demo set (demo.jsonl): knowledge definitions with numerical constraints,
questions in English and Chinese, labels computed from each question's numbers.

Run from the project root: ``python data/tagging/make_demo.py``. Deterministic (seeded).
Each row: id, knowledge_id, language, definition, question, label (1/0), semantic_label (1/0:
whether the question asks for the definition's operation or topic, its non-numerical part; a
negative built with the wrong numbers keeps 1, one built with another operation or topic has 0),
rationale (a short reasoned verdict, used for chain-of-thought demonstrations) and meta (the
numbers and the operation the question was built from; ``tests/tagging/test_data.py`` re-checks
every label from it). ``meta`` is never shown to a model.
"""

import json
import random
from pathlib import Path

RNG = random.Random(20240531)

DEFINITIONS = {
    "mul_2d_by_1d": {
        "en": "Multiplying a two-digit number by a one-digit number: the question asks for the product of a "
        "two-digit whole number (10 to 99) and a one-digit whole number (2 to 9).",
        "zh": "两位数乘一位数：题目要求计算一个两位整数（10 到 99）与一个一位整数（2 到 9）的乘积。",
    },
    "add_within_100": {
        "en": "Addition within 100: the question asks for the sum of two whole numbers, and the sum is no more than 100.",
        "zh": "100 以内的加法：题目要求计算两个整数的和，并且和不超过 100。",
    },
    "price_three_digit": {
        "en": "Shopping with prices: a word problem about buying items at given prices that asks for the total "
        "cost, where at least one item's price is a three-digit number of yuan.",
        "zh": "购物中的价格计算：题目是关于按给定价格购买物品的应用题，要求计算总价，并且至少有一件物品的价格是三位数（元）。",
    },
    "combinations_le_15": {
        "en": "Counting combinations: the question asks how many different combinations can be made by choosing "
        "one item from each of two groups, and the number of feasible combinations is no more than 15.",
        "zh": "搭配计数：题目要求从两组物品中各选一件，求一共有多少种不同的搭配，并且可行的搭配数不超过 15 种。",
    },
    "sub_with_regrouping": {
        "en": "Two-digit subtraction with regrouping: the question asks for the difference of two two-digit "
        "numbers, where the ones digit of the first number is smaller than the ones digit of the second number.",
        "zh": "两位数退位减法：题目要求计算两个两位数的差，并且被减数的个位数字小于减数的个位数字。",
    },
    "div_with_remainder": {
        "en": "Division with a remainder: the question asks to divide a two-digit dividend (10 to 99) by a one-digit "
        "divisor (2 to 9), and the division leaves a non-zero remainder.",
        "zh": "有余数的除法：题目要求用一个一位数除数（2 到 9）去除一个两位数被除数（10 到 99），并且有不为零的余数。",
    },
}

ITEMS_EN = ["pencils", "apples", "stickers", "marbles", "cookies", "books"]
ITEMS_ZH = ["支铅笔", "个苹果", "张贴纸", "颗弹珠", "块饼干", "本书"]
GOODS_EN = [("a bicycle", "a helmet"), ("a jacket", "a scarf"), ("a desk", "a lamp"), ("a tent", "a torch")]
GOODS_ZH = [("一辆自行车", "一个头盔"), ("一件夹克", "一条围巾"), ("一张书桌", "一盏台灯"), ("一顶帐篷", "一个手电筒")]
GROUPS_EN = [("shirts", "pairs of trousers"), ("kinds of bread", "kinds of jam"), ("hats", "scarves")]
GROUPS_ZH = [("件上衣", "条裤子"), ("种面包", "种果酱"), ("顶帽子", "条围巾")]


def pick(seq):
    return RNG.choice(seq)


def mul_2d_by_1d(lang, kind):
    if kind == "pos":
        a, b = RNG.randint(11, 99), RNG.randint(2, 9)
    elif kind == "num":
        a, b = (RNG.randint(101, 999), RNG.randint(2, 9)) if RNG.random() < 0.5 else (RNG.randint(11, 99), RNG.randint(11, 99))
    else:  # a sum of the same kind of numbers
        a, b = RNG.randint(11, 99), RNG.randint(2, 9)
    op = "add" if kind == "sem" else "mul"
    i = RNG.randrange(len(ITEMS_EN))
    if lang == "en":
        q = (f"A box holds {a} {ITEMS_EN[i]}. How many {ITEMS_EN[i]} are there in {b} boxes?" if op == "mul"
             else f"Tom has {a} {ITEMS_EN[i]} and gets {b} more. How many {ITEMS_EN[i]} does he have now?")
    else:
        q = (f"每盒有 {a} {ITEMS_ZH[i]}，{b} 盒一共有多少{ITEMS_ZH[i][1:]}？" if op == "mul"
             else f"小明有 {a} {ITEMS_ZH[i]}，又得到 {b} {ITEMS_ZH[i]}，现在一共有多少{ITEMS_ZH[i][1:]}？")
    return q, {"op": op, "a": a, "b": b}


def add_within_100(lang, kind):
    if kind == "pos":
        a = RNG.randint(10, 80)
        b = RNG.randint(5, 100 - a)
    elif kind == "num":
        a = RNG.randint(45, 95)
        b = RNG.randint(101 - a + 3, 99)
    else:
        a, b = RNG.randint(30, 90), RNG.randint(5, 29)
    op = "sub" if kind == "sem" else "add"
    if lang == "en":
        q = (f"There are {a} children on the playground and {b} more come. How many children are there now?" if op == "add"
             else f"There are {a} children on the playground and {b} go home. How many children are left?")
    else:
        q = (f"操场上有 {a} 个小朋友，又来了 {b} 个。现在操场上有多少个小朋友？" if op == "add"
             else f"操场上有 {a} 个小朋友，走了 {b} 个。操场上还剩多少个小朋友？")
    return q, {"op": op, "a": a, "b": b}


def price_three_digit(lang, kind):
    g = RNG.randrange(len(GOODS_EN))
    if kind == "num":
        prices = [RNG.randint(12, 99), RNG.randint(5, 99)]
    else:
        prices = [RNG.randint(100, 899), RNG.randint(15, 99)]
    topic = "distance" if kind == "sem" else "shopping"
    if topic == "shopping":
        q = (f"Mum buys {GOODS_EN[g][0]} for {prices[0]} yuan and {GOODS_EN[g][1]} for {prices[1]} yuan. "
             "How much does she pay in total?" if lang == "en"
             else f"妈妈买{GOODS_ZH[g][0]}花了 {prices[0]} 元，买{GOODS_ZH[g][1]}花了 {prices[1]} 元。一共花了多少元？")
    else:
        q = (f"A train travels {prices[0]} km in the morning and {prices[1]} km in the afternoon. "
             "How far does it travel in total?" if lang == "en"
             else f"一列火车上午行驶了 {prices[0]} 千米，下午行驶了 {prices[1]} 千米。一共行驶了多少千米？")
    return q, {"topic": topic, "prices": prices}


def combinations_le_15(lang, kind):
    if kind == "pos":
        m, n = pick([(2, 3), (3, 4), (2, 5), (3, 5), (2, 7), (4, 3), (5, 3), (2, 6)])
    elif kind == "num":
        m, n = pick([(4, 5), (3, 6), (4, 4), (5, 6), (2, 8), (6, 3)])
    else:
        m, n = pick([(3, 4), (2, 5), (4, 6)])
    op = "total" if kind == "sem" else "combine"
    g = RNG.randrange(len(GROUPS_EN))
    if lang == "en":
        a, b = GROUPS_EN[g]
        q = (f"Lily has {m} {a} and {n} {b}. If she picks one of each, how many different combinations can she make?"
             if op == "combine" else f"Lily has {m} {a} and {n} {b}. How many items does she have altogether?")
    else:
        a, b = GROUPS_ZH[g]
        q = (f"莉莉有 {m} {a}和 {n} {b}，每次各选一样搭配，一共有多少种不同的搭配？" if op == "combine"
             else f"莉莉有 {m} {a}和 {n} {b}，一共有多少样东西？")
    return q, {"op": op, "m": m, "n": n}


def sub_with_regrouping(lang, kind):
    while True:
        a, b = RNG.randint(30, 99), RNG.randint(10, 29)
        borrow = a % 10 < b % 10
        if (kind == "num" and not borrow) or (kind != "num" and borrow):
            break
    op = "add" if kind == "sem" else "sub"
    if lang == "en":
        q = (f"A library has {a} storybooks and lends out {b}. How many storybooks are left?" if op == "sub"
             else f"A library has {a} storybooks and buys {b} more. How many storybooks does it have now?")
    else:
        q = (f"图书馆有 {a} 本故事书，借出了 {b} 本，还剩多少本？" if op == "sub"
             else f"图书馆有 {a} 本故事书，又买来 {b} 本，现在有多少本？")
    return q, {"op": op, "a": a, "b": b}


def div_with_remainder(lang, kind):
    while True:
        a, b = RNG.randint(10, 99), RNG.randint(2, 9)
        if (kind == "num") == (a % b == 0):
            break
    op = "mul" if kind == "sem" else "div"
    if lang == "en":
        q = (f"{a} students are split into groups of {b}. How many full groups are there and how many students are left over?"
             if op == "div" else f"There are {b} rows of chairs with {a} chairs in each row. How many chairs are there?")
    else:
        q = (f"{a} 名学生每 {b} 人分成一组，可以分成几个完整的组？还剩几人？" if op == "div"
             else f"礼堂有 {b} 排椅子，每排 {a} 把，一共有多少把椅子？")
    return q, {"op": op, "a": a, "b": b}


def label_of(kid, meta):
    """The ground truth, from the numbers (the test suite runs the same rules)."""
    if kid == "mul_2d_by_1d":
        return meta["op"] == "mul" and 10 <= meta["a"] <= 99 and 2 <= meta["b"] <= 9
    if kid == "add_within_100":
        return meta["op"] == "add" and meta["a"] + meta["b"] <= 100
    if kid == "price_three_digit":
        return meta["topic"] == "shopping" and any(100 <= p <= 999 for p in meta["prices"])
    if kid == "combinations_le_15":
        return meta["op"] == "combine" and meta["m"] * meta["n"] <= 15
    if kid == "sub_with_regrouping":
        return meta["op"] == "sub" and 10 <= meta["b"] <= 99 and 10 <= meta["a"] <= 99 and meta["a"] % 10 < meta["b"] % 10
    if kid == "div_with_remainder":
        return meta["op"] == "div" and 10 <= meta["a"] <= 99 and 2 <= meta["b"] <= 9 and meta["a"] % meta["b"] != 0
    raise KeyError(kid)


SEMANTIC = {  # the operation or topic each definition asks for (its non-numerical part)
    "mul_2d_by_1d": ("op", "mul"),
    "add_within_100": ("op", "add"),
    "price_three_digit": ("topic", "shopping"),
    "combinations_le_15": ("op", "combine"),
    "sub_with_regrouping": ("op", "sub"),
    "div_with_remainder": ("op", "div"),
}


def semantic_label_of(kid, meta):
    """Whether the question asks for the definition's operation or topic, whatever its numbers."""
    key, wanted = SEMANTIC[kid]
    return meta[key] == wanted


KIND_WORDS = {
    "en": {"mul": "multiplication", "add": "addition", "sub": "subtraction", "div": "division",
           "combine": "combination-counting", "total": "total-count", "shopping": "shopping", "distance": "distance"},
    "zh": {"mul": "乘法", "add": "加法", "sub": "减法", "div": "除法", "combine": "搭配计数", "total": "求总数",
           "shopping": "购物", "distance": "路程"},
}


def rationale(kid, lang, meta, label):
    facts = ", ".join(f"{k} = {v}" for k, v in meta.items() if k not in ("op", "topic"))
    kind = KIND_WORDS[lang][meta.get("op") or meta.get("topic")]
    if lang == "en":
        head = f"The question is a {kind} problem with {facts}."
        tail = ("It matches the operation and every numerical requirement of the definition, so the answer is <Yes>."
                if label else "It fails at least one requirement of the definition (operation or numbers), so the answer is <No>.")
    else:
        head = f"这道题的类型是 {kind}，数据为 {facts}。"
        tail = "运算类型和所有数值要求都符合定义，所以答案是 <Yes>。" if label else "至少有一项要求（运算类型或数值）不符合定义，所以答案是 <No>。"
    return f"{head} {tail}" if lang == "en" else head + tail


def main():
    plan = {"en": ["pos"] * 5 + ["num"] * 3 + ["sem"] * 2, "zh": ["pos"] * 4 + ["num"] * 2 + ["sem"] * 2}
    rows = []
    for kid in DEFINITIONS:
        make = globals()[kid]
        for lang, kinds in plan.items():
            for n, kind in enumerate(kinds):
                question, meta = make(lang, kind)
                label = int(label_of(kid, meta))
                assert label == (kind == "pos"), (kid, kind, meta)
                semantic = int(semantic_label_of(kid, meta))
                assert semantic == (kind != "sem"), (kid, kind, meta)
                rows.append({
                    "id": f"{kid}-{lang}-{n:02d}", "knowledge_id": kid, "language": lang,
                    "definition": DEFINITIONS[kid][lang], "question": question, "label": label,
                    "semantic_label": semantic, "rationale": rationale(kid, lang, meta, label), "meta": meta,
                })
    out = Path(__file__).with_name("demo.jsonl")
    out.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    print(f"{len(rows)} rows -> {out}")


if __name__ == "__main__":
    main()
