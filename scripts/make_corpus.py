#!/usr/bin/env python3
"""Generate the small training corpus shipped in ``hyper_parallel/assets/corpus/``.

Why a generated corpus: the project must train offline, and everything it ships must be public
domain or self-made. This script builds varied, *learnable* English-like text from hand-written
word lists and templates (stories, arithmetic facts, lists, question/answer pairs, grammar-driven
paragraphs, letters, recipes, schedules, weather reports) plus a few public-domain passages and
Aesop fables retold in our own words. A model of a few million parameters picks up the strong
regularities within a few dozen optimizer steps, so the loss falls clearly in smoke runs.

Determinism: one ``random.Random(SEED)`` drives every choice and nothing iterates over sets or
dicts with unstable order, so the output is byte-identical on every run and Python version that
keeps ``random``'s documented algorithms. ``--check`` regenerates in memory and compares with the
committed files (exit code 1 on any difference).

Outputs (UTF-8, ASCII content, ``\\n`` line endings):
* ``train.jsonl`` -- one JSON object per line, the document under key ``"text"``;
* ``valid.jsonl`` -- same format, documents disjoint from train (same distribution);
* ``train.txt``   -- the train documents as plain text, separated by one blank line. Documents
  never contain blank lines themselves, so the ``text`` dataset reader (documents separated by
  blank lines) recovers exactly the documents of ``train.jsonl``.

Usage::

    python scripts/make_corpus.py            # (re)write the files
    python scripts/make_corpus.py --check    # verify the committed files are reproducible
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from collections.abc import Callable
from pathlib import Path

SEED = 20250611
# Size targets (characters of document text). train.jsonl and train.txt each end up a bit above
# TRAIN_CHARS; together with valid.jsonl the corpus stays within the 1-3 MB budget.
TRAIN_CHARS = 1_000_000
VALID_CHARS = 50_000

DEFAULT_OUT = Path(__file__).resolve().parent.parent / "hyper_parallel" / "assets" / "corpus"

# --------------------------------------------------------------------------------------------
# Word lists
# --------------------------------------------------------------------------------------------

HE_NAMES = [
    "Tom", "Sam", "Leo", "Max", "Ben", "Jack", "Oliver", "Henry", "Oscar", "Felix", "Hugo",
    "Arthur", "Theo", "Finn", "Jasper", "Milo", "Rupert", "Walter", "Edgar", "Victor", "Peter",
    "George", "Frank", "Louis", "Simon", "Daniel", "Martin", "Robin", "Arlo", "Otto",
]
SHE_NAMES = [
    "Lily", "Anna", "Mia", "Rose", "Emma", "Clara", "Ruby", "Alice", "Grace", "Ivy", "Nora",
    "Hazel", "Lucy", "Daisy", "Stella", "Iris", "Mabel", "Olive", "Poppy", "Elsie", "Maya",
    "Zoe", "Ella", "Sophie", "Julia", "Hannah", "Molly", "Fiona", "Greta", "Wendy",
]
ANIMALS = [
    "rabbit", "fox", "bear", "mouse", "owl", "cat", "dog", "duck", "frog", "squirrel",
    "hedgehog", "badger", "deer", "goat", "pig", "horse", "lamb", "turtle", "otter", "beaver",
    "robin", "sparrow", "crow", "lion", "tiger", "elephant", "monkey", "giraffe", "penguin",
    "seal", "wolf", "goose", "hen", "donkey", "camel", "koala", "panda", "zebra", "whale", "bee",
]
TRAITS = [
    "brave", "curious", "gentle", "clever", "shy", "cheerful", "kind", "busy", "sleepy",
    "proud", "patient", "lazy", "honest", "playful", "quiet", "grumpy", "wise", "careful",
    "friendly", "stubborn", "generous", "nervous", "silly", "bold", "hungry", "little", "old",
]
HOMES = [
    "in a small house at the edge of the forest",
    "in a cozy burrow under an old oak tree",
    "near a quiet river with clear, cold water",
    "on a farm beside a field of golden wheat",
    "in a busy town full of shops and bakeries",
    "on a green hill above a sleepy village",
    "in a tall tree next to a bright meadow",
    "by the sea, where the waves sang all day",
    "in a garden full of roses and tulips",
    "at the foot of a snowy mountain",
    "in a hollow log beside a muddy pond",
    "in a little cottage with a red door",
]
ROUTINES = [
    "watered the flowers in the garden",
    "walked to the river to drink",
    "counted the clouds in the sky",
    "baked bread for the whole family",
    "swept the floor and opened the windows",
    "sang a song to wake up the birds",
    "gathered nuts and berries for lunch",
    "read a book under the big tree",
    "went for a long walk along the path",
    "helped the neighbors carry water",
    "practiced jumping over the fence",
    "looked for shiny stones by the road",
]
COLORS = [
    "red", "blue", "green", "yellow", "orange", "purple", "pink", "white", "black", "brown",
    "gray", "silver", "golden",
]
OBJECTS = [
    "key", "box", "feather", "ball", "hat", "map", "lamp", "kite", "bell", "ring", "shell",
    "book", "basket", "scarf", "cup", "button", "stone", "drum", "umbrella", "boot", "letter",
    "coin", "spoon", "candle", "ribbon",
]
FIND_PLACES = [
    "under a bush", "beside the path", "in the tall grass", "behind the barn",
    "at the bottom of the stream", "on top of a rock", "inside an old log",
    "next to the garden gate", "near the bridge", "in the sand", "by the well",
]
WEATHER_ADJ = ["sunny", "rainy", "windy", "cloudy", "snowy", "foggy", "warm", "cold", "bright"]
FEELINGS = ["happy", "surprised", "excited", "puzzled", "worried", "proud", "curious", "glad"]
PROBLEMS = [
    ("the bridge over the river was broken", "built a new bridge out of branches and rope"),
    ("a storm had blown the roof off the barn", "carried planks up the ladder and fixed the roof"),
    ("the little ones were lost in the woods", "followed the footprints and brought them home"),
    ("the well had run dry", "dug a new well near the willow tree"),
    ("nobody could find the way home in the fog", "rang a bell so everyone could follow the sound"),
    ("the apples were too high to reach", "stood on each other's shoulders to pick them"),
    ("the garden was full of weeds", "pulled the weeds one by one until the garden was clean"),
    ("the cart was stuck in the mud", "pushed together until the wheels rolled free"),
    ("winter was coming and there was no food", "worked every day to fill the store with grain"),
    ("the lantern had gone out", "lit a candle and shared its light with everyone"),
]
MORALS = [
    "Friends who work together can do hard things.",
    "Slow and steady wins the race.",
    "A kind act is never wasted.",
    "It is wise to prepare for tomorrow.",
    "Honesty is the best policy.",
    "Even the smallest helper can make a big difference.",
    "Patience brings its own reward.",
    "Listen before you leap.",
]
TOWNS = [
    "Maplewood", "Riverside", "Stonebridge", "Fairview", "Oakdale", "Brookfield", "Hillcrest",
    "Pinehurst", "Meadowbrook", "Clearwater", "Ashford", "Greenvale", "Willowby", "Northgate",
]
DAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]
MONTHS = [
    ("January", 31), ("February", 28), ("March", 31), ("April", 30), ("May", 31), ("June", 30),
    ("July", 31), ("August", 31), ("September", 30), ("October", 31), ("November", 30),
    ("December", 31),
]
NUMBER_WORDS = [
    "zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten",
    "eleven", "twelve", "thirteen", "fourteen", "fifteen", "sixteen", "seventeen", "eighteen",
    "nineteen", "twenty",
]
ORDINALS = ["first", "second", "third", "fourth", "fifth", "sixth", "seventh", "eighth", "ninth",
            "tenth"]

# Grammar vocabulary: (singular, plural) nouns; (base, third person, past) verbs.
NOUNS = [
    ("dog", "dogs"), ("cat", "cats"), ("child", "children"), ("farmer", "farmers"),
    ("teacher", "teachers"), ("bird", "birds"), ("baker", "bakers"), ("sailor", "sailors"),
    ("king", "kings"), ("queen", "queens"), ("student", "students"), ("doctor", "doctors"),
    ("fisherman", "fishermen"), ("painter", "painters"), ("mouse", "mice"), ("fox", "foxes"),
    ("horse", "horses"), ("girl", "girls"), ("boy", "boys"), ("neighbor", "neighbors"),
]
THINGS = [
    ("apple", "apples"), ("ball", "balls"), ("box", "boxes"), ("letter", "letters"),
    ("song", "songs"), ("story", "stories"), ("picture", "pictures"), ("basket", "baskets"),
    ("boat", "boats"), ("cake", "cakes"), ("flower", "flowers"), ("book", "books"),
    ("window", "windows"), ("door", "doors"), ("road", "roads"), ("garden", "gardens"),
    ("bridge", "bridges"), ("tree", "trees"), ("river", "rivers"), ("house", "houses"),
]
TRANSITIVE = [
    ("see", "sees", "saw"), ("find", "finds", "found"), ("carry", "carries", "carried"),
    ("paint", "paints", "painted"), ("open", "opens", "opened"), ("watch", "watches", "watched"),
    ("build", "builds", "built"), ("read", "reads", "read"), ("clean", "cleans", "cleaned"),
    ("bring", "brings", "brought"), ("like", "likes", "liked"), ("hold", "holds", "held"),
    ("follow", "follows", "followed"), ("draw", "draws", "drew"), ("visit", "visits", "visited"),
]
INTRANSITIVE = [
    ("sleep", "sleeps", "slept"), ("run", "runs", "ran"), ("sing", "sings", "sang"),
    ("laugh", "laughs", "laughed"), ("wait", "waits", "waited"), ("dance", "dances", "danced"),
    ("swim", "swims", "swam"), ("rest", "rests", "rested"), ("walk", "walks", "walked"),
    ("smile", "smiles", "smiled"),
]
ADJECTIVES = [
    "big", "small", "old", "young", "happy", "tired", "quiet", "loud", "tall", "short", "new",
    "bright", "dark", "warm", "cold", "busy", "gentle", "clever", "green", "red",
]
ADVERBS = [
    "quietly", "quickly", "slowly", "happily", "carefully", "loudly", "gently", "softly",
    "early", "late",
]
PREP_PHRASES = [
    "near the river", "under the old bridge", "in the morning", "after dinner",
    "behind the house", "on the hill", "in the garden", "at the market", "by the window",
    "before sunrise", "during the storm", "across the field",
]

FOODS = {
    "pancakes": (["2 cups of flour", "2 eggs", "1 cup of milk", "1 spoon of sugar",
                  "a pinch of salt"],
                 ["Mix the flour, sugar and salt in a bowl.", "Beat the eggs with the milk.",
                  "Pour the milk and eggs into the flour and stir until smooth.",
                  "Heat a pan with a little butter.",
                  "Pour a small circle of batter into the pan.",
                  "Turn the pancake over when bubbles appear.", "Cook the other side until golden."]),
    "vegetable soup": (["2 carrots", "1 onion", "3 potatoes", "4 cups of water",
                        "a pinch of salt", "a handful of peas"],
                       ["Wash and peel the vegetables.", "Cut the carrots, onion and potatoes.",
                        "Put the vegetables in a pot with the water.",
                        "Bring the water to a boil.",
                        "Let the soup simmer for twenty minutes.", "Add the peas and the salt.",
                        "Stir the soup and taste it."]),
    "fruit salad": (["1 apple", "1 banana", "a cup of grapes", "1 orange", "a spoon of honey"],
                    ["Wash the fruit.", "Cut the apple and the banana into small pieces.",
                     "Peel the orange and separate it into slices.",
                     "Put all the fruit in a big bowl.", "Pour the honey over the fruit.",
                     "Mix gently with a spoon."]),
    "bread": (["4 cups of flour", "1 spoon of yeast", "1 spoon of salt",
               "2 cups of warm water"],
              ["Mix the yeast with the warm water.", "Add the flour and the salt.",
               "Knead the dough for ten minutes.", "Cover the dough and let it rise for an hour.",
               "Shape the dough into a loaf.", "Bake the loaf in a hot oven for forty minutes."]),
    "lemonade": (["4 lemons", "a cup of sugar", "6 cups of cold water", "some ice"],
                 ["Squeeze the juice from the lemons.", "Stir the sugar into the water.",
                  "Add the lemon juice.", "Taste it and add more sugar if you like.",
                  "Pour it over ice."]),
    "rice with beans": (["2 cups of rice", "1 can of beans", "4 cups of water", "1 onion",
                         "a pinch of salt"],
                        ["Rinse the rice in cold water.", "Chop the onion.",
                         "Fry the onion in a little oil.", "Add the rice and the water.",
                         "Cook the rice for twenty minutes.", "Stir in the beans and the salt."]),
}
MARKET_ITEMS = [
    "apples", "bread", "milk", "eggs", "cheese", "carrots", "potatoes", "onions", "rice",
    "beans", "butter", "honey", "tea", "oranges", "pears", "tomatoes", "flour", "sugar", "fish",
    "lemons",
]

# Question/answer fact tables.
ANIMAL_SOUNDS = [
    ("cow", "moo"), ("dog", "woof"), ("cat", "meow"), ("duck", "quack"), ("sheep", "baa"),
    ("pig", "oink"), ("horse", "neigh"), ("owl", "hoot"), ("frog", "croak"), ("lion", "roar"),
    ("bee", "buzz"), ("mouse", "squeak"), ("rooster", "cock-a-doodle-doo"), ("snake", "hiss"),
]
ANIMAL_BABIES = [
    ("cat", "kitten"), ("dog", "puppy"), ("cow", "calf"), ("sheep", "lamb"), ("horse", "foal"),
    ("duck", "duckling"), ("frog", "tadpole"), ("bear", "cub"), ("goat", "kid"), ("pig", "piglet"),
    ("owl", "owlet"), ("deer", "fawn"), ("hen", "chick"), ("swan", "cygnet"), ("kangaroo", "joey"),
]
OPPOSITES = [
    ("hot", "cold"), ("big", "small"), ("up", "down"), ("day", "night"), ("fast", "slow"),
    ("happy", "sad"), ("open", "closed"), ("full", "empty"), ("light", "dark"), ("old", "new"),
    ("tall", "short"), ("wet", "dry"), ("early", "late"), ("loud", "quiet"), ("hard", "soft"),
    ("near", "far"), ("first", "last"), ("push", "pull"), ("win", "lose"), ("begin", "end"),
]
THING_COLORS = [
    ("grass", "green"), ("the sky on a clear day", "blue"), ("snow", "white"), ("a banana", "yellow"),
    ("a ripe tomato", "red"), ("coal", "black"), ("an orange", "orange"), ("chocolate", "brown"),
    ("a lemon", "yellow"), ("milk", "white"), ("a carrot", "orange"), ("a strawberry", "red"),
    ("a crow", "black"), ("the sea", "blue"),
]
CAPITALS = [
    ("France", "Paris"), ("Japan", "Tokyo"), ("Italy", "Rome"), ("Spain", "Madrid"),
    ("Germany", "Berlin"), ("Egypt", "Cairo"), ("Canada", "Ottawa"), ("Kenya", "Nairobi"),
    ("Peru", "Lima"), ("Norway", "Oslo"), ("Greece", "Athens"), ("Portugal", "Lisbon"),
    ("Ireland", "Dublin"), ("Sweden", "Stockholm"), ("Austria", "Vienna"), ("Poland", "Warsaw"),
    ("Chile", "Santiago"), ("Cuba", "Havana"), ("Thailand", "Bangkok"), ("Russia", "Moscow"),
]
PLURALS = [
    ("cat", "cats"), ("box", "boxes"), ("mouse", "mice"), ("child", "children"),
    ("foot", "feet"), ("tooth", "teeth"), ("man", "men"), ("woman", "women"), ("leaf", "leaves"),
    ("knife", "knives"), ("baby", "babies"), ("city", "cities"), ("goose", "geese"),
    ("sheep", "sheep"), ("fish", "fish"), ("bus", "buses"), ("wolf", "wolves"), ("story", "stories"),
]
SHAPES = [("triangle", 3), ("square", 4), ("pentagon", 5), ("hexagon", 6), ("octagon", 8)]

ACTIVITIES = [
    ("wakes up", "wake up"), ("eats breakfast", "eat breakfast"), ("goes to school", "go to school"),
    ("reads a book", "read a book"), ("plays in the park", "play in the park"),
    ("eats lunch", "eat lunch"), ("feeds the cat", "feed the cat"),
    ("does homework", "do homework"), ("helps in the kitchen", "help in the kitchen"),
    ("eats dinner", "eat dinner"), ("takes a bath", "take a bath"), ("goes to bed", "go to bed"),
]


# --------------------------------------------------------------------------------------------
# Helpers
# --------------------------------------------------------------------------------------------


def cap(text: str) -> str:
    """Capitalize the first character only (``str.capitalize`` would lowercase the rest)."""
    return text[:1].upper() + text[1:]


def join_words(items: list[str]) -> str:
    """'a', 'a and b', 'a, b and c'."""
    if len(items) == 1:
        return items[0]
    return ", ".join(items[:-1]) + " and " + items[-1]


def article(word: str) -> str:
    return "an" if word[:1] in "aeiou" else "a"


def number_word(n: int) -> str:
    """English words for 0..99 (enough for the arithmetic lessons)."""
    if n <= 20:
        return NUMBER_WORDS[n]
    tens = ["", "", "twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety"]
    t, u = divmod(n, 10)
    return tens[t] if u == 0 else f"{tens[t]}-{NUMBER_WORDS[u]}"


def character(rng: random.Random) -> tuple[str, str, str]:
    """(name, subject pronoun, possessive pronoun)."""
    if rng.random() < 0.5:
        return rng.choice(HE_NAMES), "he", "his"
    return rng.choice(SHE_NAMES), "she", "her"


# --------------------------------------------------------------------------------------------
# Document generators (each returns one document: non-empty lines, no blank line)
# --------------------------------------------------------------------------------------------


def gen_story(rng: random.Random) -> str:
    name, he, his = character(rng)
    friend, _, _ = character(rng)
    while friend == name:
        friend, _, _ = character(rng)
    animal, friend_animal = rng.choice(ANIMALS), rng.choice(ANIMALS)
    trait = rng.choice(TRAITS)
    color, obj = rng.choice(COLORS), rng.choice(OBJECTS)
    problem, solution = rng.choice(PROBLEMS)
    s = [
        rng.choice([
            f"Once upon a time, there was {article(trait)} {trait} {animal} named {name}.",
            f"Long ago, {article(trait)} {trait} {animal} called {name} lived {rng.choice(HOMES)}.",
            f"There once was {article(trait)} {trait} {animal}. {cap(his)} name was {name}.",
        ]),
    ]
    if not s[0].startswith("Long ago"):
        s.append(f"{name} lived {rng.choice(HOMES)}.")
    s.append(f"Every morning, {name} {rng.choice(ROUTINES)}.")
    s.append(f"One {rng.choice(WEATHER_ADJ)} day, {name} found {article(color)} {color} {obj} "
             f"{rng.choice(FIND_PLACES)}.")
    s.append(rng.choice([
        f"{name} was very {rng.choice(FEELINGS)}.",
        f"\"What a strange {obj}!\" said {name}.",
        f"{cap(he)} picked it up and looked at it closely.",
    ]))
    s.append(f"Then {name} met {friend}, {article(friend_animal)} {friend_animal} who lived nearby.")
    s.append(f"\"Hello, {friend},\" said {name}. \"Look what I found.\"")
    s.append(f"\"It is {article(color)} {color} {obj},\" said {friend}. \"I have never seen one like it.\"")
    s.append(f"But that evening, {name} and {friend} saw that {problem}.")
    s.append(rng.choice([
        f"\"What shall we do?\" asked {friend}.",
        f"{friend} began to cry, but {name} said, \"Do not worry. We can fix this.\"",
        f"{name} thought for a long time.",
    ]))
    s.append(f"Together they {solution}.")
    if rng.random() < 0.5:
        s.append(f"The {color} {obj} turned out to be very useful, and {name} kept it forever.")
    s.append(rng.choice([
        f"After that, {name} and {friend} were the best of friends.",
        f"Everyone in the village thanked {name} and {friend}.",
        f"That night, {name} slept well, tired and happy.",
    ]))
    if rng.random() < 0.6:
        s.append(f"The moral of the story is: {rng.choice(MORALS)}")
    s.append("The end.")
    # A story is one or two paragraphs on separate lines (never a blank line).
    cut = rng.randint(4, len(s) - 3)
    return " ".join(s[:cut]) + "\n" + " ".join(s[cut:])


def gen_arithmetic(rng: random.Random) -> str:
    lines = [rng.choice([
        f"Arithmetic practice, lesson {rng.randint(1, 99)}.",
        "Let us practice some arithmetic.",
        "Math facts for today:",
        f"Worksheet number {rng.randint(1, 40)}: adding, subtracting and multiplying.",
    ])]
    style = rng.randrange(4)
    for _ in range(rng.randint(8, 18)):
        op = rng.randrange(4)
        if op == 0:
            a, b = rng.randint(0, 50), rng.randint(0, 50)
            fact = (f"{a} + {b} = {a + b}", f"{a} plus {b} is {a + b}.",
                    f"What is {a} plus {b}? The answer is {a + b}.")
        elif op == 1:
            a = rng.randint(0, 60)
            b = rng.randint(0, a)
            fact = (f"{a} - {b} = {a - b}", f"{a} minus {b} is {a - b}.",
                    f"What is {a} minus {b}? The answer is {a - b}.")
        elif op == 2:
            a, b = rng.randint(0, 12), rng.randint(0, 12)
            fact = (f"{a} x {b} = {a * b}", f"{a} times {b} is {a * b}.",
                    f"What is {a} times {b}? The answer is {a * b}.")
        else:
            b = rng.randint(1, 10)
            q = rng.randint(0, 10)
            fact = (f"{q * b} / {b} = {q}", f"{q * b} divided by {b} is {q}.",
                    f"What is {q * b} divided by {b}? The answer is {q}.")
        if style == 3:
            # Spelled-out numbers for small sums, e.g. "seven plus two is nine."
            a, b = rng.randint(0, 10), rng.randint(0, 10)
            lines.append(f"{cap(number_word(a))} plus {number_word(b)} is {number_word(a + b)}.")
        else:
            lines.append(fact[style])
    return "\n".join(lines)


def gen_counting(rng: random.Random) -> str:
    kind = rng.randrange(5)
    if kind == 0:
        step = rng.choice([1, 2, 3, 5, 10])
        start = rng.randint(0, 20) * step
        nums = [str(start + i * step) for i in range(rng.randint(8, 16))]
        return f"Counting by {step}s from {start}: " + ", ".join(nums) + "."
    if kind == 1:
        n = rng.randint(2, 12)
        lines = [f"The {n} times table:"]
        lines += [f"{i} x {n} = {i * n}" for i in range(1, 13)]
        return "\n".join(lines)
    if kind == 2:
        a = rng.randint(1, 80)
        nums = list(range(a, a + rng.randint(5, 12)))
        return (f"The numbers from {nums[0]} to {nums[-1]} in words are "
                + join_words([number_word(x) for x in nums]) + ".")
    if kind == 3:
        limit = rng.choice([10, 20, 30, 40])
        evens = [str(x) for x in range(0, limit + 1, 2)]
        odds = [str(x) for x in range(1, limit + 1, 2)]
        return (f"The even numbers up to {limit} are {join_words(evens)}.\n"
                f"The odd numbers up to {limit} are {join_words(odds)}.")
    lines = ["Square numbers:"]
    lines += [f"{i} times {i} is {i * i}." for i in range(1, rng.randint(6, 13))]
    return "\n".join(lines)


def gen_list(rng: random.Random) -> str:
    kind = rng.randrange(6)
    if kind == 0:
        name, _, his = character(rng)
        items = rng.sample(MARKET_ITEMS, rng.randint(4, 9))
        lines = [f"{name}'s shopping list for {rng.choice(DAYS)}:"]
        for item in items:
            lines.append(f"- {rng.randint(1, 6)} bags of {item}" if rng.random() < 0.3
                         else f"- {item}")
        lines.append(f"{name} put the list in {his} pocket and walked to the market.")
        return "\n".join(lines)
    if kind == 1:
        d = rng.randrange(7)
        return (f"There are seven days in a week: {join_words(DAYS)}. "
                f"The day after {DAYS[d]} is {DAYS[(d + 1) % 7]}. "
                f"The day before {DAYS[d]} is {DAYS[d - 1]}. "
                f"{DAYS[d]} is the {ORDINALS[d]} day of the week.")
    if kind == 2:
        lines = ["The twelve months of the year:"]
        for i, (month, days) in enumerate(MONTHS):
            lines.append(f"{month} is month number {i + 1} and has {days} days.")
        m = rng.randrange(12)
        lines.append(f"After {MONTHS[m][0]} comes {MONTHS[(m + 1) % 12][0]}.")
        return "\n".join(lines)
    if kind == 3:
        letters = [chr(ord("A") + i) for i in range(26)]
        start = rng.randint(0, 20)
        words = ["apple", "ball", "cat", "dog", "egg", "fish", "goat", "hat", "ink", "jam", "kite",
                 "lamp", "moon", "nest", "owl", "pig", "queen", "rain", "sun", "tree", "umbrella",
                 "van", "water", "box", "yarn", "zebra"]
        lines = [f"{letters[i]} is for {words[i]}." for i in range(start, min(26, start + 8))]
        return "The alphabet: " + ", ".join(letters) + ".\n" + "\n".join(lines)
    if kind == 4:
        return ("The colors of the rainbow are red, orange, yellow, green, blue, indigo and violet. "
                f"Red and yellow make orange. Blue and yellow make green. Red and blue make purple. "
                f"My favorite color is {rng.choice(COLORS)}.")
    shape, sides = rng.choice(SHAPES)
    return (f"A {shape} has {sides} sides and {sides} corners. A circle has no corners. "
            f"Two {shape}s have {2 * sides} sides in total. Three {shape}s have {3 * sides} sides.")


def gen_qa(rng: random.Random) -> str:
    lines = []
    for _ in range(rng.randint(5, 10)):
        kind = rng.randrange(8)
        if kind == 0:
            a, s = rng.choice(ANIMAL_SOUNDS)
            lines += [f"Q: What sound does {article(a)} {a} make?", f"A: {article(a).title()} {a} says {s}."]
        elif kind == 1:
            a, b = rng.choice(ANIMAL_BABIES)
            lines += [f"Q: What is a baby {a} called?", f"A: A baby {a} is called {article(b)} {b}."]
        elif kind == 2:
            a, b = rng.choice(OPPOSITES)
            if rng.random() < 0.5:
                a, b = b, a
            lines += [f"Q: What is the opposite of {a}?", f"A: The opposite of {a} is {b}."]
        elif kind == 3:
            t, c = rng.choice(THING_COLORS)
            lines += [f"Q: What color is {t}?", f"A: {cap(t)} is {c}."]
        elif kind == 4:
            country, city = rng.choice(CAPITALS)
            lines += [f"Q: What is the capital of {country}?",
                      f"A: The capital of {country} is {city}."]
        elif kind == 5:
            a, b = rng.sample(range(1, 100), 2)
            lines += [f"Q: Which is bigger, {a} or {b}?",
                      f"A: {max(a, b)} is bigger than {min(a, b)}."]
        elif kind == 6:
            one, many = rng.choice(PLURALS)
            lines += [f"Q: What is the plural of {one}?", f"A: One {one}, two {many}."]
        else:
            word = rng.choice(["cat", "dog", "sun", "tree", "book", "fish", "milk", "rain", "home",
                               "bird", "apple", "water", "green", "happy"])
            lines += [f"Q: How do you spell {word}?", f"A: {'-'.join(word.upper())}."]
    return "\n".join(lines)


def _noun_phrase(rng: random.Random, table: list[tuple[str, str]], plural: bool) -> str:
    sing, plur = rng.choice(table)
    adj = rng.choice(ADJECTIVES) + " " if rng.random() < 0.5 else ""
    if plural:
        det = rng.choice(["the", "some", "many", "two", "three", "all the", "those"])
        return f"{det} {adj}{plur}"
    det = rng.choice(["the", "the", "a", "this", "that", "every", "one"])
    if det == "a":
        det = article(adj or sing)
    return f"{det} {adj}{sing}"


def gen_grammar(rng: random.Random) -> str:
    """A paragraph of sentences from a small agreement-respecting grammar."""
    sentences = []
    past = rng.random() < 0.4
    for _ in range(rng.randint(5, 10)):
        plural = rng.random() < 0.4
        subj = _noun_phrase(rng, NOUNS, plural)
        if rng.random() < 0.6:
            base, third, ptense = rng.choice(TRANSITIVE)
            verb = ptense if past else (base if plural else third)
            rest = " " + _noun_phrase(rng, THINGS, rng.random() < 0.4)
        else:
            base, third, ptense = rng.choice(INTRANSITIVE)
            verb = ptense if past else (base if plural else third)
            rest = " " + rng.choice(ADVERBS) if rng.random() < 0.6 else ""
        pp = " " + rng.choice(PREP_PHRASES) if rng.random() < 0.5 else ""
        sentence = f"{subj} {verb}{rest}{pp}."
        if past and rng.random() < 0.3:
            sentence = f"yesterday, {sentence}"
        sentences.append(cap(sentence))
    return " ".join(sentences)


LETTER_DEEDS = ["visited the market", "painted the fence", "wrote a poem", "baked a cake",
                "went fishing", "planted some beans"]
LETTER_TOPICS = ["garden", "school", "family", "trip", "new house", "work"]


def gen_letter(rng: random.Random) -> str:
    to, _, _ = character(rng)
    sender, _, _ = character(rng)
    town = rng.choice(TOWNS)
    lines = [f"Dear {to},",
             rng.choice(["I hope you are well.", "Thank you for your last letter.",
                         "It has been a long time since I wrote to you."]),
             f"The weather in {town} has been {rng.choice(WEATHER_ADJ)} this week.",
             f"Yesterday I {rng.choice(ROUTINES)}, and then I {rng.choice(LETTER_DEEDS)}.",
             f"My {rng.choice(ANIMALS)} is {rng.choice(TRAITS)} and sends you greetings.",
             f"Please write back soon and tell me about your {rng.choice(LETTER_TOPICS)}.",
             rng.choice(["Your friend,", "With love,", "Best wishes,", "Yours truly,"]),
             sender]
    return "\n".join(lines)


def gen_recipe(rng: random.Random) -> str:
    food = rng.choice(sorted(FOODS))
    ingredients, steps = FOODS[food]
    lines = [f"How to make {food} for {rng.randint(2, 8)} people.",
             "You will need " + join_words(ingredients) + "."]
    lines.append("1. Wash your hands.")
    lines += [f"{i + 2}. {step}" for i, step in enumerate(steps)]
    lines.append(rng.choice(["Serve and enjoy.", "Share it with your friends.",
                             "Serve it warm.", "Enjoy your meal."]))
    return "\n".join(lines)


def gen_schedule(rng: random.Random) -> str:
    name, _, _ = character(rng)
    hour = rng.randint(6, 8)
    lines = [f"A day in the life of {name}."]
    for third, base in ACTIVITIES:
        if rng.random() < 0.25:
            continue
        lines.append(f"At {hour}:00, {name} {third}.")
        hour = hour + rng.randint(1, 2)
        if hour > 21:
            break
    lines.append(f"{name} likes to {rng.choice(ACTIVITIES)[1]} more than anything else.")
    return "\n".join(lines)


def gen_weather(rng: random.Random) -> str:
    town = rng.choice(TOWNS)
    day = rng.choice(DAYS)
    t_morning = rng.randint(-5, 25)
    t_noon = t_morning + rng.randint(1, 10)
    w1, w2 = rng.choice(WEATHER_ADJ), rng.choice(WEATHER_ADJ)
    return (f"Weather report for {town} on {day}. "
            f"In the morning it will be {w1}, with a temperature of {t_morning} degrees. "
            f"By noon the temperature will rise to {t_noon} degrees. "
            f"In the afternoon it will be {w2}. "
            f"The difference between morning and noon is {t_noon - t_morning} degrees. "
            + rng.choice(["Take an umbrella.", "Wear a warm coat.", "Enjoy the day.",
                          "Drink plenty of water.", "Stay safe on the roads."]))


GENERATORS: list[tuple[Callable[[random.Random], str], int]] = [
    (gen_story, 24),
    (gen_arithmetic, 14),
    (gen_counting, 8),
    (gen_list, 8),
    (gen_qa, 14),
    (gen_grammar, 14),
    (gen_letter, 6),
    (gen_recipe, 4),
    (gen_schedule, 4),
    (gen_weather, 4),
]

# --------------------------------------------------------------------------------------------
# Fixed passages: public-domain historical texts and Aesop fables retold in our own words.
# --------------------------------------------------------------------------------------------

FIXED_TEXTS = [
    # US Declaration of Independence (1776), preamble and opening of the second paragraph.
    (
        "When in the Course of human events, it becomes necessary for one people to dissolve the "
        "political bands which have connected them with another, and to assume among the powers of "
        "the earth, the separate and equal station to which the Laws of Nature and of Nature's God "
        "entitle them, a decent respect to the opinions of mankind requires that they should declare "
        "the causes which impel them to the separation.\n"
        "We hold these truths to be self-evident, that all men are created equal, that they are "
        "endowed by their Creator with certain unalienable Rights, that among these are Life, "
        "Liberty and the pursuit of Happiness. That to secure these rights, Governments are "
        "instituted among Men, deriving their just powers from the consent of the governed. That "
        "whenever any Form of Government becomes destructive of these ends, it is the Right of the "
        "People to alter or to abolish it, and to institute new Government, laying its foundation on "
        "such principles and organizing its powers in such form, as to them shall seem most likely to "
        "effect their Safety and Happiness."
    ),
    # Gettysburg Address (1863).
    (
        "Four score and seven years ago our fathers brought forth on this continent, a new nation, "
        "conceived in Liberty, and dedicated to the proposition that all men are created equal.\n"
        "Now we are engaged in a great civil war, testing whether that nation, or any nation so "
        "conceived and so dedicated, can long endure. We are met on a great battle-field of that war. "
        "We have come to dedicate a portion of that field, as a final resting place for those who "
        "here gave their lives that that nation might live. It is altogether fitting and proper that "
        "we should do this.\n"
        "But, in a larger sense, we can not dedicate -- we can not consecrate -- we can not hallow -- "
        "this ground. The brave men, living and dead, who struggled here, have consecrated it, far "
        "above our poor power to add or detract. The world will little note, nor long remember what "
        "we say here, but it can never forget what they did here. It is for us the living, rather, "
        "to be dedicated here to the unfinished work which they who fought here have thus far so "
        "nobly advanced. It is rather for us to be here dedicated to the great task remaining before "
        "us -- that from these honored dead we take increased devotion to that cause for which they "
        "gave the last full measure of devotion -- that we here highly resolve that these dead shall "
        "not have died in vain -- that this nation, under God, shall have a new birth of freedom -- "
        "and that government of the people, by the people, for the people, shall not perish from "
        "the earth."
    ),
    (
        "The Tortoise and the Hare.\n"
        "A hare was always boasting about how fast he could run. \"Nobody can beat me,\" he said. "
        "\"I challenge anyone to a race.\" A tortoise answered quietly, \"I accept your challenge.\" "
        "The hare laughed and laughed, but the race was set. When it began, the hare dashed far "
        "ahead, and soon he could not even see the tortoise behind him. Feeling sure of himself, he "
        "lay down under a shady tree to take a nap. The tortoise walked on, one slow step after "
        "another, and never stopped. When the hare woke up, he ran as fast as he could, but it was "
        "too late. The tortoise had already crossed the finish line.\n"
        "Slow and steady wins the race."
    ),
    (
        "The Fox and the Grapes.\n"
        "One hot afternoon a hungry fox came upon a vine heavy with ripe purple grapes. The grapes "
        "hung from a branch high above the ground. The fox jumped as high as he could, but he could "
        "not reach them. He stepped back, ran, and jumped again, and again he missed. He tried many "
        "times until he was tired and sore. At last he turned away with his nose in the air. \"Those "
        "grapes are surely sour,\" he said. \"I did not want them anyway.\"\n"
        "It is easy to scorn what you cannot have."
    ),
    (
        "The Boy Who Cried Wolf.\n"
        "A shepherd boy watched the village sheep on a hill. He was bored, so one day he shouted, "
        "\"Wolf! Wolf! A wolf is chasing the sheep!\" The villagers ran up the hill to help, but "
        "there was no wolf, and the boy laughed at them. A few days later he did the same thing, "
        "and again the villagers came running and found nothing. Then one evening a real wolf crept "
        "out of the forest. \"Wolf! Wolf!\" cried the boy, but this time nobody came, because nobody "
        "believed him anymore.\n"
        "A liar is not believed even when he tells the truth."
    ),
    (
        "The Ant and the Grasshopper.\n"
        "All summer long the grasshopper sang and played in the warm fields. The ant worked hard every "
        "day, carrying grain to her nest. \"Why do you work so hard?\" asked the grasshopper. \"Come "
        "and sing with me.\" \"I am storing food for the winter,\" said the ant, \"and you should do "
        "the same.\" The grasshopper only laughed. When winter came and the fields were covered with "
        "snow, the grasshopper had nothing to eat. He knocked on the ant's door and begged for some "
        "grain.\n"
        "It is wise to prepare today for the needs of tomorrow."
    ),
    (
        "The Lion and the Mouse.\n"
        "A lion was sleeping in the sun when a little mouse ran across his paw and woke him. The lion "
        "caught the mouse and opened his great mouth. \"Please let me go,\" begged the mouse. \"One "
        "day I may be able to help you.\" The lion laughed at the idea, but he let the mouse go. Some "
        "time later the lion was caught in a hunter's net. He roared and pulled, but the ropes held "
        "him fast. The mouse heard him, ran to the net, and chewed through the ropes until the lion "
        "was free.\n"
        "No act of kindness, however small, is ever wasted."
    ),
    (
        "The Crow and the Pitcher.\n"
        "A thirsty crow found a pitcher with a little water at the bottom. The water was too low for "
        "her beak to reach, and the pitcher was too heavy to tip over. The crow thought for a while. "
        "Then she picked up a pebble and dropped it into the pitcher. She dropped another, and "
        "another, and another. With every pebble the water rose a little higher, until at last she "
        "could drink.\n"
        "Little by little does the trick."
    ),
    (
        "The North Wind and the Sun.\n"
        "The North Wind and the Sun argued about which of them was stronger. They saw a traveler on "
        "the road and agreed that whoever could make him take off his coat would be the winner. The "
        "North Wind blew as hard as he could, but the harder he blew, the tighter the traveler held "
        "his coat. Then the Sun came out and shone warmly. The traveler grew warm, then hot, and soon "
        "he took off his coat and sat down in the shade.\n"
        "Gentleness often succeeds where force fails."
    ),
    (
        "The Town Mouse and the Country Mouse.\n"
        "A country mouse invited his cousin from the town to visit. He served plain food: beans, "
        "barley and a little cheese. The town mouse said, \"Come to the town with me, and I will show "
        "you how to live.\" In the town they found a feast of cakes and jelly on a great table. But "
        "as they began to eat, the door opened and a cat ran in, and the mice had to hide. \"Good "
        "bye, cousin,\" said the country mouse. \"I would rather eat beans in peace than cake in "
        "fear.\"\n"
        "A simple life in safety is better than luxury in danger."
    ),
    (
        "The Dog and His Reflection.\n"
        "A dog was carrying a bone across a bridge over a stream. Looking down, he saw his own "
        "reflection in the water and thought it was another dog with a bigger bone. He opened his "
        "mouth to bark and grab the other bone, and his own bone fell into the water and sank.\n"
        "If you are greedy, you may lose what you already have."
    ),
    (
        "The Goose That Laid the Golden Eggs.\n"
        "A farmer and his wife owned a goose that laid one golden egg every day. They grew rich, but "
        "they were not content. \"If the goose lays golden eggs,\" they said, \"she must be full of "
        "gold inside.\" So they killed the goose and opened her up, and found nothing at all. Now "
        "they had no more golden eggs.\n"
        "Those who want too much may lose everything."
    ),
]


# --------------------------------------------------------------------------------------------
# Assembly
# --------------------------------------------------------------------------------------------


def _check_document(doc: str) -> str:
    """Enforce the invariants the ``text`` reader relies on (see module docstring)."""
    lines = doc.split("\n")
    assert doc == doc.strip(), "documents have no leading/trailing whitespace"
    assert all(line.strip() and line == line.rstrip() for line in lines), "no blank lines"
    assert doc.isascii(), "ASCII only"
    return doc


def generate(seed: int = SEED) -> tuple[list[str], list[str]]:
    """Return ``(train_docs, valid_docs)``."""
    rng = random.Random(seed)
    funcs = [f for f, _ in GENERATORS]
    weights = [w for _, w in GENERATORS]

    def sample_docs(target_chars: int) -> list[str]:
        docs, size = [], 0
        while size < target_chars:
            doc = _check_document(rng.choices(funcs, weights)[0](rng))
            docs.append(doc)
            size += len(doc)
        return docs

    valid = sample_docs(VALID_CHARS)
    train = sample_docs(TRAIN_CHARS)
    # Spread the fixed passages over the training documents at deterministic positions.
    for i, text in enumerate(FIXED_TEXTS):
        pos = (i + 1) * len(train) // (len(FIXED_TEXTS) + 1)
        train.insert(pos, _check_document(text))
    return train, valid


def render(train: list[str], valid: list[str]) -> dict[str, str]:
    """File name -> file content."""

    def jsonl(docs: list[str]) -> str:
        return "".join(json.dumps({"text": d}, ensure_ascii=True) + "\n" for d in docs)

    return {
        "train.jsonl": jsonl(train),
        "valid.jsonl": jsonl(valid),
        "train.txt": "\n\n".join(train) + "\n",
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out-dir", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--check", action="store_true",
                        help="compare with the files in --out-dir instead of writing them")
    args = parser.parse_args(argv)

    train, valid = generate()
    files = render(train, valid)
    if args.check:
        bad = [name for name, content in files.items()
               if not (args.out_dir / name).is_file()
               or (args.out_dir / name).read_text(encoding="utf-8") != content]
        if bad:
            print(f"corpus differs from the generator output: {', '.join(bad)}; "
                  f"rerun `python scripts/make_corpus.py`", file=sys.stderr)
            return 1
        print("corpus is up to date")
        return 0
    args.out_dir.mkdir(parents=True, exist_ok=True)
    for name, content in files.items():
        # newline="" keeps "\n" on every platform so the bytes match --check everywhere.
        with open(args.out_dir / name, "w", encoding="utf-8", newline="") as fh:
            fh.write(content)
    total = sum(len(c.encode("utf-8")) for c in files.values())
    print(f"wrote {len(train)} train / {len(valid)} valid documents, {total / 1e6:.2f} MB total, "
          f"to {args.out_dir}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
