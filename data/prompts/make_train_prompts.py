"""Build data/prompts/train.jsonl: 320 hand-written-template prompts for distillation.

All topics, passages and code snippets below were written by hand for specnb.
Run from the repository root:

    python data/prompts/make_train_prompts.py

The output is deterministic (random.Random(0), standard library only) and must
match the committed train.jsonl exactly. Prompts here are deliberately on
different topics and texts than data/prompts/eval.jsonl.
"""

import json
import os
import random
import sys

N_OPEN = 160
N_GROUNDED = 160

# ---------------------------------------------------------------------------
# Open-ended prompts: (task, templates, topics). Each topic is used once with a
# template drawn at random. A category whose templates list is None holds
# complete, hand-written questions.
# ---------------------------------------------------------------------------

OPEN_CATEGORIES = [
    (
        "qa",
        [
            "Explain {} in simple terms.",
            "Can you give me a short explanation of {}?",
            "What should a beginner know about {}? Keep it short.",
            "I never understood {}. Could you explain it briefly?",
        ],
        [
            "gravity",
            "magnetism",
            "the water cycle",
            "a solar eclipse",
            "static electricity",
            "the greenhouse effect",
            "black holes",
            "evaporation",
            "how sound travels through air",
            "volcanic eruptions",
            "how the human heart pumps blood",
            "the immune system",
            "DNA",
            "ocean tides",
            "friction",
            "how solar panels make electricity",
            "how a thermometer works",
            "why Earth has seasons",
            "lightning",
            "erosion",
            "digestion",
        ],
    ),
    (
        "qa",
        None,
        [
            "Why does ice float on water?",
            "Why do we have leap years?",
            "How do birds find their way when they migrate?",
            "Why is sea water salty?",
            "Why do onions make people cry when you cut them?",
            "How do airplanes stay in the air?",
            "Why does bread go stale?",
            "What makes popcorn pop?",
            "Why do cats purr?",
            "How far away is the Moon from the Earth?",
            "Why do people yawn?",
            "How do fish breathe underwater?",
            "Why does metal feel colder than wood at the same temperature?",
            "What causes thunder?",
            "Why do stars seem to twinkle at night?",
            "What is the difference between weather and climate?",
        ],
    ),
    (
        "qa",
        [
            "Who was {}?",
            "Tell me briefly who {} was and what they are remembered for.",
            "What is {} famous for?",
        ],
        [
            "Isaac Newton",
            "Ada Lovelace",
            "Cleopatra",
            "Leonardo da Vinci",
            "Nelson Mandela",
            "Galileo Galilei",
            "Florence Nightingale",
            "Genghis Khan",
            "Charles Darwin",
            "Amelia Earhart",
            "Julius Caesar",
            "Harriet Tubman",
            "Albert Einstein",
            "Confucius",
        ],
    ),
    (
        "qa",
        [
            "What was {}?",
            "Give me a short overview of {}.",
            "Why was {} important in history?",
        ],
        [
            "the Silk Road",
            "the Renaissance",
            "the Industrial Revolution",
            "the fall of the Berlin Wall",
            "the Apollo 11 Moon landing",
            "the ancient Olympic Games",
            "the building of the pyramids of Giza",
            "the Roman Empire",
            "the invention of the telephone",
            "the French Revolution",
            "the Viking Age",
        ],
    ),
    (
        "qa",
        None,
        [
            "What is a dictionary in Python and when should I use one?",
            "What does the `return` statement do in a Python function?",
            "How do I read a text file line by line in Python?",
            "What is a for loop? Show a short Python example.",
            "What is the difference between `==` and `===` in JavaScript?",
            "What does `console.log` do in JavaScript?",
            "How do I add an item to the end of an array in JavaScript?",
            "What is an arrow function in JavaScript?",
            "What does the SQL `GROUP BY` clause do?",
            "What is the difference between `WHERE` and `HAVING` in SQL?",
            "What is a primary key in a database table?",
            "How do I sort the results of a SQL query? Give an example.",
            "What is a variable in programming?",
            "What is the difference between a function and a method in Python?",
            "What is an `if` statement? Give a simple Python example.",
            "What is JSON and why is it used so often?",
            "What does `import` do in Python?",
            "Why should I write comments in my code?",
            "What is a syntax error, and how do I find one?",
        ],
    ),
    (
        "chat",
        None,
        [
            "Write a Python function that checks whether a number is even.",
            "Write a JavaScript function that reverses a string.",
            "Write a SQL query that counts how many rows are in a table called `orders`.",
            "How do I print \"Hello, world!\" in Python and in JavaScript?",
            "Write a short Python program that asks for the user's name and greets them.",
        ],
    ),
    (
        "qa",
        [
            "What is {}, and why does it matter?",
            "Explain {} to someone who is new to managing money.",
            "In a few sentences, what is {}?",
        ],
        [
            "compound interest",
            "an emergency fund",
            "a monthly budget",
            "a credit score",
            "inflation",
            "a savings account",
            "the 50/30/20 budgeting rule",
            "a mortgage",
            "a pension plan",
            "an index fund",
            "the idea of paying yourself first",
        ],
    ),
    (
        "chat",
        [
            "Can you give me some tips for {}?",
            "What advice would you give to someone who is {}?",
            "I need help with {}. Where should I start?",
            "What are a few practical tips for {}?",
        ],
        [
            "learning a new language",
            "saving money on groceries",
            "staying focused while studying",
            "making friends in a new city",
            "preparing for a job interview",
            "keeping houseplants alive",
            "getting started with running",
            "reducing screen time",
            "staying calm before an exam",
            "organizing a small closet",
            "writing a good cover letter",
            "speaking in front of a group",
            "keeping a daily journal",
            "teaching a child to ride a bike",
            "staying motivated while working from home",
            "planning a birthday party on a small budget",
            "learning to play the guitar as an adult",
            "becoming a better listener",
            "decluttering a kitchen",
            "sticking to a new habit",
        ],
    ),
    (
        "chat",
        None,
        [
            "How can I drink more water during the day?",
            "What are some easy stretches I can do at my desk?",
            "How can I add more vegetables to my meals?",
            "Is it better to exercise in the morning or in the evening?",
            "How can I look after my eyes when I use a computer all day?",
            "What are some healthy snacks to bring to work?",
            "How many steps a day should I try to walk?",
            "How can I cut down on sugary drinks?",
            "What is a simple ten-minute workout I can do at home?",
            "How can I remember to take short breaks while I work?",
            "Why is breakfast important, and what is a quick healthy option?",
            "How can I protect my skin from the sun in summer?",
        ],
    ),
    (
        "chat",
        [
            "How do I make {}?",
            "Can you give me a simple recipe for {}?",
            "What is the easiest way to make {} at home?",
        ],
        [
            "a basic tomato pasta sauce",
            "banana bread",
            "a vegetable stir-fry",
            "guacamole",
            "French toast",
            "lentil soup",
            "homemade pizza dough",
            "a Greek salad",
            "oatmeal cookies",
            "crispy roasted potatoes",
            "a simple chickpea curry",
            "fresh lemonade",
            "a grilled cheese sandwich",
            "hummus",
            "fruit smoothies",
        ],
    ),
    (
        "chat",
        None,
        [
            "What can I cook with potatoes, onions and cheese?",
            "How do I stop pasta from sticking together?",
            "What spices go well with roasted carrots?",
            "How can I tell when chicken is fully cooked?",
            "What is a good vegetarian lunch I can prepare the night before?",
        ],
    ),
    (
        "chat",
        [
            "I am visiting {} for three days. What should I see?",
            "What are the must-see places in {}?",
            "Give me a short travel guide for a first visit to {}.",
        ],
        [
            "Rome",
            "Tokyo",
            "Paris",
            "New York City",
            "Istanbul",
            "Cape Town",
            "Mexico City",
            "Amsterdam",
            "Sydney",
            "Prague",
            "Cairo",
            "Vancouver",
            "Edinburgh",
        ],
    ),
    (
        "chat",
        None,
        [
            "How can I avoid jet lag on a long flight?",
            "How can I travel cheaply around Europe?",
            "What are some tips for traveling alone for the first time?",
            "Is it better to book a hotel or an apartment for a family trip?",
            "How do I keep my passport and money safe while traveling?",
            "What should I do if the airline loses my luggage?",
            "What are good things to do on a long train journey?",
        ],
    ),
    (
        "chat",
        [
            "Write a short story about {}.",
            "Tell me a short bedtime story about {}.",
            "Write a short poem about {}.",
            "Write a four-line poem about {}.",
        ],
        [
            "a cat who wants to fly",
            "a lost key that finds its way home",
            "a girl who finds an old map in her attic",
            "a dragon who is afraid of the dark",
            "the first snow of winter",
            "a lighthouse keeper during a storm",
            "autumn leaves",
            "a friendly ghost who lives in a school",
            "a boy who can talk to trees",
            "a city at sunrise",
            "a turtle who enters a race",
            "an old bicycle",
            "a small town bakery",
            "friendship",
            "rain on a window",
            "a penguin who visits the desert",
        ],
    ),
    (
        "chat",
        [
            "Write a short email to {}.",
            "Help me write a polite email to {}.",
            "Draft a brief email to {}.",
        ],
        [
            "my landlord asking him to fix a leaking tap",
            "my son's teacher asking for a meeting about his homework",
            "my manager asking for a day off next Friday",
            "a colleague thanking her for helping with a project",
            "a hotel asking whether early check-in is possible",
            "a client apologizing for a delayed delivery",
            "my neighbors letting them know about a small party this weekend",
            "my professor asking for a two-day extension on an essay",
            "a friend inviting her to a picnic in the park",
            "my gym asking to cancel my membership",
            "a restaurant asking to book a table for eight people",
            "a new team member welcoming him to the team",
        ],
    ),
    (
        "chat",
        None,
        [
            "What are some fun things to do on a rainy afternoon?",
            "Can you recommend a hobby that doesn't cost much money?",
            "What are some good questions to ask when meeting someone new?",
            "Give me five name ideas for a small coffee shop.",
            "What is a good way to start learning to draw?",
            "Tell me a fun fact about the planet Jupiter.",
            "Can you suggest some board games for a family evening?",
            "What are some simple ways to be more eco-friendly at home?",
            "How do I politely say no to a friend's invitation?",
            "Tell me a short, friendly joke about computers.",
            "What are three interesting facts about elephants?",
            "How can I make my small balcony feel cozy?",
        ],
    ),
]


# ---------------------------------------------------------------------------
# Input-grounded material. Every passage and snippet is original.
# ---------------------------------------------------------------------------

# (language, code, [two edit instructions specific to this snippet])
CODE_SNIPPETS = [
    ("python", '''
def count_vowels(s):
    n = 0
    for ch in s:
        if ch.lower() in "aeiou":
            n += 1
    return n


word = "Banana"
print(count_vowels(word))
''', [
        "Rename the variable `n` to `vowel_count` in this function.",
        "Add type hints to the `count_vowels` function signature.",
    ]),
    ("python", '''
def to_fahrenheit(temps):
    result = []
    for t in temps:
        f = t * 9 / 5 + 32
        result.append(f)
    return result


readings = [12.5, 18.0, 21.3, 9.8]
converted = to_fahrenheit(readings)
for value in converted:
    print(round(value, 1))
''', [
        "Rewrite the loop inside `to_fahrenheit` as a list comprehension.",
        "Add a docstring to `to_fahrenheit` explaining what it does.",
    ]),
    ("python", '''
def average(numbers):
    total = 0
    for num in numbers:
        total += num
    return total / len(numbers)


scores = [88, 92, 79, 95]
print(average(scores))
print(average([]))
''', [
        "This code crashes on the last line. Fix `average` so it returns 0 for an empty list.",
        "Add type hints to `average` and rename `num` to `value`.",
    ]),
    ("python", '''
def find_largest(values):
    largest = 0
    for v in values:
        if v > largest:
            largest = v
    return largest


print(find_largest([3, 7, 2]))
print(find_largest([-5, -2, -9]))
''', [
        "The second call prints 0 instead of -2. Fix the bug in `find_largest`.",
        "Rename the variable `v` to `value` everywhere in `find_largest`.",
    ]),
    ("python", '''
class BankAccount:
    def __init__(self, owner, balance):
        self.owner = owner
        self.balance = balance

    def deposit(self, amount):
        self.balance += amount

    def withdraw(self, amount):
        self.balance -= amount


acct = BankAccount("Dana", 100)
acct.deposit(50)
acct.withdraw(30)
print(acct.balance)
''', [
        "Change the `withdraw` method so that it prints \"Insufficient funds\" and does nothing when the amount is larger than the balance.",
        "Add type hints to all the methods of the `BankAccount` class.",
    ]),
    ("python", '''
def load_names(path):
    f = open(path)
    names = []
    for line in f:
        line = line.strip()
        if line != "":
            names.append(line)
    f.close()
    return names


people = load_names("guests.txt")
print(len(people), "guests")
''', [
        "Rewrite `load_names` to use a `with` statement instead of calling `close()` by hand.",
        "Add a short comment above each line inside `load_names` explaining what it does.",
    ]),
    ("python", '''
def describe(item, price, qty):
    line = "Item: " + item + ", price: " + str(price) + ", quantity: " + str(qty)
    return line


def order_total(order):
    total = 0
    for name, p, q in order:
        total += p * q
    return total


order = [("pencil", 0.5, 10), ("notebook", 2.25, 3), ("eraser", 0.75, 4)]
for name, p, q in order:
    print(describe(name, p, q))
print("Total:", order_total(order))
''', [
        "Change `describe` so it builds the string with an f-string instead of `+`.",
        "Rename the function `order_total` to `compute_total` and update the place where it is called.",
    ]),
    ("python", '''
def word_counts(text):
    counts = {}
    for word in text.split():
        word = word.lower()
        if word in counts:
            counts[word] = counts[word] + 1
        else:
            counts[word] = 1
    return counts


sentence = "The cat and the dog and the bird"
print(word_counts(sentence))
''', [
        "Simplify the `if`/`else` block in `word_counts` by using `counts.get(word, 0)`.",
        "Add a docstring and type hints to `word_counts`.",
    ]),
    ("python", '''
def is_palindrome(text):
    cleaned = ""
    for ch in text:
        if ch.isalnum():
            cleaned += ch.lower()
    return cleaned == cleaned[::-1]


tests = ["Racecar", "hello", "Was it a car or a cat I saw"]
for t in tests:
    print(t, "->", is_palindrome(t))
''', [
        "Rename the parameter `text` to `phrase` in `is_palindrome`.",
        "Add a docstring with one usage example to `is_palindrome`.",
    ]),
    ("python", '''
def fizzbuzz(limit):
    for i in range(1, limit):
        if i % 3 == 0:
            print("Fizz")
        elif i % 5 == 0:
            print("Buzz")
        elif i % 15 == 0:
            print("FizzBuzz")
        else:
            print(i)


fizzbuzz(15)
''', [
        "This FizzBuzz never prints \"FizzBuzz\" and stops one number too early. Fix both problems.",
        "Add type hints to `fizzbuzz` and a one-line docstring.",
    ]),
    ("python", '''
inventory = {"apples": 5, "bread": 1, "milk": 2}


def use_item(name, amount):
    if name in inventory:
        inventory[name] = inventory[name] - amount
        if inventory[name] <= 0:
            print("Out of", name)
            del inventory[name]
    else:
        print("No", name, "in stock")


use_item("apples", 2)
use_item("milk", 2)
use_item("eggs", 1)
print(inventory)
''', [
        "Rename the dictionary `inventory` to `pantry` everywhere in this code.",
        "Change `use_item` so it returns True when the item was used and False otherwise.",
    ]),
    ("python", '''
def letter_grade(score):
    if score >= 90:
        return "A"
    if score >= 80:
        return "B"
    if score >= 70:
        return "C"
    if score >= 60:
        return "D"
    return "F"


for s in [95, 83, 71, 64, 12]:
    print(s, letter_grade(s))
''', [
        "Add a check at the start of `letter_grade` that raises a ValueError if the score is below 0 or above 100.",
        "Add type hints and a docstring to `letter_grade`.",
    ]),
    ("python", '''
def factorial(n):
    if n == 0:
        return 1
    return n * factorial(n - 1)


def combinations(n, k):
    return factorial(n) // (factorial(k) * factorial(n - k))


print(factorial(5))
print(combinations(6, 2))
''', [
        "Rewrite `factorial` so it uses a loop instead of recursion.",
        "Rename `combinations` to `choose` and update the call at the bottom.",
    ]),
    ("python", '''
def unique(items):
    seen = []
    result = []
    for item in items:
        if item not in seen:
            seen.append(item)
            result.append(item)
    return result


colors = ["red", "blue", "red", "green", "blue"]
print(unique(colors))
''', [
        "Make `unique` faster by using a set for `seen` instead of a list.",
        "Add type hints to `unique` using `list[str]`.",
    ]),
    ("python", '''
import time


def countdown(seconds):
    while seconds > 0:
        print(seconds)
        time.sleep(1)
        seconds = seconds - 1
    print("Done!")


countdown(3)
''', [
        "Rewrite the `while` loop in `countdown` as a `for` loop using `range`.",
        "Add a parameter `message` to `countdown` with the default value \"Done!\" and print it at the end.",
    ]),
    ("python", '''
def is_valid_email(address):
    if "@" not in address:
        return False
    name, domain = address.split("@", 1)
    if len(name) == 0:
        return False
    if "." not in domain:
        return False
    return True


print(is_valid_email("sam@example.com"))
print(is_valid_email("no-at-sign.com"))
print(is_valid_email("@example.com"))
''', [
        "Rename the variable `name` to `local_part` in `is_valid_email`.",
        "Add a docstring to `is_valid_email` that describes the three checks it makes.",
    ]),
    ("javascript", '''
function sumEven(numbers) {
  var total = 0;
  for (var i = 0; i < numbers.length; i++) {
    if (numbers[i] % 2 == 0) {
      total = total + numbers[i];
    }
  }
  return total;
}

console.log(sumEven([1, 2, 3, 4, 5, 6]));
''', [
        "Replace `var` with `let` or `const` where appropriate.",
        "Rename the function `sumEven` to `sumOfEvenNumbers` and update the call.",
    ]),
    ("javascript", '''
function greet(user) {
  return "Hello, " + user.firstName + " " + user.lastName + "! You have " + user.messages + " new messages.";
}

const users = [
  { firstName: "Ana", lastName: "Lopez", messages: 3 },
  { firstName: "Ben", lastName: "Okafor", messages: 0 },
];

users.forEach(function (u) {
  console.log(greet(u));
});
''', [
        "Change `greet` to use a template literal instead of string concatenation.",
        "Convert the `function (u)` callback into an arrow function.",
    ]),
    ("javascript", '''
function checkAge(age) {
  if (age = 18) {
    return "Just became an adult";
  } else if (age > 18) {
    return "Adult";
  } else {
    return "Minor";
  }
}

console.log(checkAge(12));
console.log(checkAge(18));
console.log(checkAge(30));
''', [
        "This function always returns \"Just became an adult\". Find and fix the bug.",
        "Add a JSDoc comment above `checkAge` that describes its parameter and return value.",
    ]),
    ("javascript", '''
const products = [
  { name: "Lamp", price: 25, inStock: true },
  { name: "Chair", price: 60, inStock: false },
  { name: "Rug", price: 80, inStock: true },
  { name: "Mug", price: 8, inStock: true },
];

const available = [];
for (let i = 0; i < products.length; i++) {
  if (products[i].inStock) {
    available.push(products[i].name);
  }
}
console.log(available);
''', [
        "Rewrite the loop using the array methods `filter` and `map`.",
        "Change the code so it only keeps products that are in stock and cost less than 50.",
    ]),
    ("javascript", '''
function loadUser(id) {
  return fetch("/api/users/" + id)
    .then(function (response) {
      return response.json();
    })
    .then(function (data) {
      console.log(data.name);
      return data;
    });
}

loadUser(42);
''', [
        "Rewrite `loadUser` using `async` and `await`.",
        "Add error handling so that a failed request logs \"Could not load user\".",
    ]),
    ("javascript", '''
let count = 0;

function increment() {
  count = count + 1;
  document.getElementById("counter").textContent = count;
}

function reset() {
  count = 0;
  document.getElementById("counter").textContent = count;
}

document.getElementById("plus").addEventListener("click", increment);
document.getElementById("reset").addEventListener("click", reset);
''', [
        "Move the repeated line that updates the page into a helper function called `render`.",
        "Rename the variable `count` to `clicks` everywhere.",
    ]),
    ("sql", '''
SELECT
    c.first_name,
    c.last_name,
    c.email,
    c.signup_date
FROM customers c
WHERE c.country = 'Canada'
ORDER BY c.last_name;
''', [
        "Change this query so it also keeps only customers who signed up in 2022 or later.",
        "Change the query so it returns the 10 most recent signups instead of sorting by last name.",
    ]),
    ("sql", '''
-- Sales per product
SELECT
    product_id,
    SUM(quantity) AS units_sold,
    SUM(quantity * unit_price) AS revenue
FROM order_items
GROUP BY product_id
ORDER BY revenue DESC;
''', [
        "Add a HAVING clause so only products with more than 100 units sold are shown.",
        "Rename the column alias `revenue` to `total_sales` everywhere in the query.",
    ]),
    ("sql", '''
SELECT
    e.name,
    e.title,
    d.name
FROM employees e
JOIN departments d ON e.department_id = d.id
WHERE e.active = 1
ORDER BY d.name, e.name;
''', [
        "Give the two `name` columns clear aliases: `employee_name` and `department_name`.",
        "Change the JOIN to a LEFT JOIN so employees without a department are also listed.",
    ]),
    ("sql", '''
CREATE TABLE books (
    id INTEGER PRIMARY KEY,
    title TEXT,
    author TEXT,
    year INTEGER,
    pages INTEGER
);

INSERT INTO books (id, title, author, year, pages)
VALUES (1, 'The Quiet Harbor', 'L. Moreno', 2015, 312);
''', [
        "Make `title` and `author` required by adding NOT NULL.",
        "Add a new column `rating` of type REAL to the table and give the inserted book a rating of 4.5.",
    ]),
]

CODE_FORMATS = [
    "{instr}\n\n```{lang}\n{code}\n```",
    "```{lang}\n{code}\n```\n\n{instr}",
    "Here is some {name} code:\n\n```{lang}\n{code}\n```\n\n{instr}",
    "{instr} Here is the code:\n\n```{lang}\n{code}\n```",
]
CODE_SUFFIXES = ["", "", " Show the full updated code.", " Only change what is needed."]
LANG_NAMES = {"python": "Python", "javascript": "JavaScript", "sql": "SQL"}

# Short made-up news items.
NEWS = [
    """The town of Millbrook opened its new pedestrian bridge over the Alder River on Saturday morning. The bridge, which took fourteen months to build, connects the old market square with the train station on the east bank. Before the bridge opened, people walking to the station had to take a twenty-minute detour through the industrial area. Mayor Priya Nandakumar cut the ribbon in front of about three hundred residents, many of whom had brought bicycles to be among the first to cross. The project cost 2.4 million dollars, most of it paid by a regional transport grant. Local shop owners hope the bridge will bring more visitors into the market on weekends.""",
    """A family-run bakery in Harlow Bay has switched to a four-day working week, and its owners say business has never been better. Since March, Crumb & Co. has been open only from Wednesday to Saturday. Owner Tom Reyes says his six employees now work longer days but get three full days off, and nobody has quit since the change. To keep customers happy, the bakery started a pre-order system so people can collect bread on Saturday for the rest of the weekend. Sales for the first three months were eight percent higher than the same period last year. Reyes admits the new schedule was a risk, but says rested bakers make better bread.""",
    """Students from Eastfield High School won first place at the state robotics championship last weekend. Their machine, nicknamed Pickle, had to sort colored blocks into bins as fast as possible while avoiding moving obstacles. The team of nine students spent five months designing and testing it after school. Team captain Lina Haddad said the hardest moment was a motor failure on the morning of the final, which they fixed with a spare part borrowed from a rival team. The win means Eastfield will travel to the national competition in June. The school is now raising money to pay for the trip and has planned a bake sale for next Friday.""",
    """The city of Portvale will add 500 electric bikes to its bike-share program this summer, doubling the size of the fleet. City officials said the current bikes are often all taken during the morning rush, especially near the university and the central bus station. The new bikes will be placed at 40 new docking stations, mostly in neighborhoods that had no stations before. A single ride will still cost one dollar for the first thirty minutes, but electric bikes will add a charge of ten cents per minute after that. The program will also offer half-price yearly passes to students and people over sixty-five. The first new stations are expected to open in early July.""",
    """A golden retriever that went missing during a hiking trip in the Cedar Hills was found safe after nine days. The dog, named Biscuit, ran off after being frightened by thunder on a trail about forty kilometers from home. Its owners, Mark and Elena Fischer, put up posters in nearby villages and shared photos online. On Tuesday, a farmer named Jo Whitley spotted the dog drinking from a water trough in her field and called the number on its collar. Biscuit was thin and tired but otherwise healthy, according to a local vet. The Fischers said they plan to buy a GPS tracker for the collar before their next trip.""",
    """The Northgate Museum of Natural History announced that entry will be free on the first Sunday of every month starting in September. The museum currently charges fifteen dollars for adults and seven dollars for children. Director Samuel Achebe said the goal is to make the museum more welcoming to families who cannot afford regular tickets. The free days will be paid for by a donation from a local engineering company. Visitors on free Sundays will also be able to join short guided tours of the dinosaur hall and the new insect gallery. The museum expects large crowds and recommends that visitors book a free time slot on its website in advance.""",
    """Officials in Dunmore County have asked residents to use less water after three weeks without rain and temperatures above 35 degrees. Starting Monday, watering lawns with sprinklers will only be allowed before 8 a.m. and after 7 p.m., and washing cars at home is banned until further notice. The county's main reservoir is at 41 percent of its normal level, the lowest point in twelve years. Farmers will not be affected by the new rules for now, but the county said this could change if the dry weather continues. Residents who break the rules may receive a warning first and then a fine of 100 dollars.""",
    """A small software company in Brightwater has released a free phone app that tells users which bin each item belongs in. Users take a photo of an item, and the app shows whether it goes in recycling, compost or general waste according to local rules. The company, GreenSort, was started last year by two former classmates, Aisha Karim and Leo Brandt. They say the idea came from arguments in their shared apartment about where to throw pizza boxes. In its first month, the app was downloaded more than 20,000 times. The city council is now discussing whether to promote the app on public buses and in schools.""",
    """The Lakeshore Community Orchestra will perform its first concert in two years on November 12 at the Grand Hall. The orchestra, made up of about sixty amateur musicians from teenagers to retirees, had to stop rehearsing when its old rehearsal space was sold. A local church offered its basement last spring, and the group has been practicing every Thursday since then. The program includes music by Dvorak and a new piece written by the orchestra's youngest member, 16-year-old cellist Maya Osei. Tickets cost ten dollars, and children under twelve get in free. All money raised will go toward new music stands and repairs to the orchestra's drums.""",
    """Hundreds of travelers were stuck at Kestrel International Airport on Friday after a computer problem stopped all check-in desks for nearly four hours. The airport said the issue was caused by a failed software update and was not the result of a cyberattack. Forty-two flights were delayed and eleven were cancelled. Passengers were given water and snacks while staff checked tickets by hand for a small number of urgent flights. By early evening, most systems were working again. The airport has apologized and said travelers on cancelled flights can get a full refund or rebook for free within the next seven days.""",
    """The Saturday farmers market in Oakridge is moving from the old parking lot behind the post office to Jubilee Park. Organizers say the new location has more shade, space for twice as many stalls, and public toilets, which the old site lacked. The first market in the park will take place on May 6. About forty vendors are expected, selling fruit, vegetables, cheese, honey and baked goods. Some shoppers are worried that parking near the park will be harder to find, so the market will offer a free shuttle bus from the town center every fifteen minutes. The market will run from 8 a.m. to 1 p.m. every Saturday until the end of October.""",
    """Researchers from the University of Westmarch have described a new species of beetle found in the mountain forests of the northern highlands. The beetle is about the size of a grain of rice and has a bright blue shell that shines green in sunlight. The team found it while studying insects that live in rotting logs. They named it after the volunteer who collected the first sample, a retired teacher named Helen Park. The researchers say the beetle seems to live only in a small area of old forest, so protecting that forest is important. Their description was published this month in a scientific journal about insects.""",
    """The Riverdale Youth Football League will stop keeping scores for players under ten years old starting next season. League president Carlos Mendes said the change is meant to help young children focus on learning skills and having fun rather than winning. Coaches will still give feedback after every match, and all players will get equal time on the field. Some parents welcomed the news, while others said children enjoy knowing who won. Older age groups will not be affected, and there will still be a tournament with trophies for players aged ten to sixteen. The new season begins on the second weekend of September.""",
    """About 12,000 homes in the southern part of Granton lost power on Wednesday evening after strong winds brought down a power line near Miller Road. The outage began at around 6:30 p.m. and lasted up to five hours in some streets. Traffic lights at several busy crossings stopped working, and police officers directed traffic until the power returned. The energy company said crews worked through the night to repair the damage, and all homes were reconnected by 1 a.m. Residents whose food spoiled because of the outage can apply for a small payment from the company by filling out a form on its website.""",
    """A new cafe in the center of Fenwick lets customers play any of its 400 board games while they drink coffee. The cafe, called Roll & Brew, opened last month in a former bookshop on High Street. Owners Jenna Liu and Omar Said spent two years collecting games from markets and online sales. Customers pay five dollars for unlimited play, and staff members are available to explain the rules of any game. On Tuesday evenings, the cafe hosts a beginners night for people who have never played modern board games. The owners say they are surprised by how many families come in on weekday afternoons after school.""",
    """Saint Brigid's Hospital is looking for volunteers to read to patients and keep them company during long stays. The new program, called Friendly Voices, was started after nurses noticed that many older patients had few visitors. Volunteers will be asked to give at least two hours a week for three months. They will receive a short training course on hospital rules, hygiene and how to talk with patients who are unwell or confused. The hospital says no medical knowledge is needed, only patience and a kind attitude. People interested in joining can attend an information evening on March 3 in the hospital's main lobby.""",
]

SUMMARY_FORMATS = [
    "Summarize this news story in one sentence:\n\n{text}",
    "{text}\n\nSummarize the article above in three bullet points.",
    "Write a short headline and a two-sentence summary for this news item:\n\n{text}",
    "Give me a short summary of the following article.\n\n{text}",
    "Can you sum this up for me in two or three sentences?\n\n{text}",
    "What is the main point of this news story? Answer briefly.\n\n{text}",
]

# (paragraph, [questions]) for question answering about a given text.
QA_PASSAGES = [
    ("""Honeybees live in large groups called colonies. A healthy colony in summer may have 20,000 to 60,000 bees, but only one queen. The queen lays all of the eggs, sometimes more than 1,500 in a single day. Most of the other bees are female worker bees. Young workers stay inside the hive, where they clean cells, feed larvae and make wax. Older workers fly out to collect nectar and pollen from flowers. Male bees, called drones, do not collect food; their main job is to mate with queens from other colonies. In winter, the bees cluster together and shiver their muscles to keep the hive warm.""",
     ["How many queens does a healthy colony have?", "What do older worker bees do?"]),
    ("""Kessington is a small village on the northern coast that was founded in 1742 by fishing families from the south. For more than a century, almost everyone in the village worked on boats or in the fish market. In 1891, a railway line reached Kessington, and the village slowly became a holiday destination. Large hotels were built along the seafront, and the old fish market was turned into a concert hall in 1923. Today, only four fishing boats still work from the harbor, but the village holds a fish festival every August to remember its history. The population is about 3,200 people, but it doubles in summer.""",
     ["When did the railway reach Kessington?", "What happened to the old fish market?"]),
    ("""Most cheese is made from just a few ingredients: milk, salt, a starter culture and an enzyme called rennet. First, the milk is warmed, and the starter culture is added. These friendly bacteria turn some of the milk sugar into acid. Next, rennet is added, which makes the milk thicken into a soft gel. The gel is cut into small pieces called curds, which release a yellowish liquid called whey. The curds are drained, salted and pressed into molds. Finally, many cheeses are left to age for weeks, months or even years. During aging, the flavor becomes stronger and the texture changes.""",
     ["What does rennet do to the milk?", "What is the liquid released by the curds called?"]),
    ("""Welcome to the support team! Your first week will be mostly training. On Monday you will meet your mentor, Rosa, who has worked on the team for six years. From Tuesday to Thursday you will listen to recorded calls and read the help center articles about billing, accounts and shipping. On Friday you will answer your first real customer emails, but Rosa will check each reply before it is sent. Our team works from 9 a.m. to 5 p.m., with lunch at any time between noon and 2 p.m. If you are sick, please send a message to the team chat before 8:30 a.m. so we can plan the day.""",
     ["Who is the new team member's mentor?", "What should you do if you are sick?"]),
    ("""The Moon does not make its own light. We see it because it reflects light from the Sun. As the Moon travels around the Earth, which takes about 29.5 days, we see different amounts of its sunlit side. When the Moon is between the Earth and the Sun, the lit side faces away from us, and we call this a new moon. About two weeks later, the Moon is on the far side of the Earth, and we see the whole lit side as a full moon. The shapes in between are called crescent, quarter and gibbous phases.""",
     ["Why can we see the Moon?", "What is a new moon?"]),
    ("""The Vortex 300 is a compact kitchen blender designed for small apartments. It has a 600-watt motor, three speed settings and a pulse button for crushing ice. The jug holds 1.2 liters, is made of BPA-free plastic and can be washed in the dishwasher. The blades are removable for easier cleaning. The blender weighs 2.1 kilograms and comes in white, black and sage green. It includes a travel cup with a lid, so users can blend a smoothie and take it with them. The Vortex 300 comes with a two-year warranty and costs 59 dollars.""",
     ["How many speed settings does the Vortex 300 have?", "What colors is the blender available in?"]),
    ("""Around 1440, Johannes Gutenberg, a goldsmith in the German city of Mainz, developed a printing press that used movable metal type. Each letter was cast as a small metal block, and the blocks could be arranged into lines of text, inked and pressed onto paper. When a page was finished, the letters could be taken apart and used again. Before this, most books in Europe were copied by hand, which took a very long time. Gutenberg's most famous work is a Bible printed in the 1450s. Printing made books cheaper and helped ideas spread much faster across Europe.""",
     ["What was Gutenberg's job?", "How were most books made in Europe before the printing press?"]),
    ("""Residents of Birchwood Apartments are reminded of the building rules. Quiet hours are from 10 p.m. to 7 a.m. every day. Bicycles must be kept in the bike room in the basement and not in the hallways. Trash and recycling should be taken to the bins behind the building; bags left in the stairwell will be removed and the resident may be charged a cleaning fee. Guests may use the rooftop terrace only when a resident is with them. The laundry room is open from 7 a.m. to 10 p.m. Please report any broken lights or leaks to the building manager, Mr. Okoro, by phone or email.""",
     ["When are quiet hours?", "Where should bicycles be kept?"]),
    ("""Octopuses are sea animals with eight arms and no bones, which lets them squeeze through very small gaps. They have three hearts: two pump blood to the gills, and one pumps it to the rest of the body. Their blood is blue because it uses a copper-based molecule to carry oxygen. Octopuses are known for being clever. In experiments, they have learned to open jars and find their way through simple mazes. Many octopuses can also change the color and texture of their skin in less than a second, which helps them hide from predators and sneak up on prey such as crabs.""",
     ["How many hearts does an octopus have?", "Why is octopus blood blue?"]),
    ("""To make simple pancakes, mix 200 grams of flour, a pinch of salt and one tablespoon of sugar in a large bowl. Make a hole in the middle, crack in two eggs and pour in a little of the 300 milliliters of milk. Whisk slowly, adding the rest of the milk bit by bit until the batter is smooth. Let the batter rest for ten minutes. Heat a non-stick pan over medium heat and add a small piece of butter. Pour in a small ladle of batter and tilt the pan so it spreads. Cook for about one minute on each side, until golden.""",
     ["How long should the batter rest?", "How much milk does the recipe use?"]),
    ("""Lumen Tools started in 1998 as a two-person workshop in a garage in Dayton, repairing lawnmowers and garden equipment. In 2004, the founders, brothers Paul and Victor Sandoval, designed their first product: a folding garden rake that could fit in the trunk of a small car. It sold well at local hardware stores, and by 2010 the company had thirty employees. Lumen Tools now makes more than 120 products, including shovels, pruning shears and watering cans, and sells them in nine countries. The company still repairs old tools for free if they were bought from Lumen, a tradition the founders say they will never drop.""",
     ["What was the company's first product?", "What does Lumen Tools do with broken tools that customers bought from it?"]),
    ("""Washing your hands with soap is one of the simplest ways to avoid getting sick. Soap does not just rinse germs away; it breaks apart the outer layer of many germs and lifts dirt and oils off the skin. Health experts recommend wetting your hands with clean water, adding soap and rubbing all parts of your hands for at least 20 seconds, including the backs, between the fingers and under the nails. Then rinse well and dry your hands with a clean towel or let them air dry. It is especially important to wash your hands before eating, after using the toilet and after blowing your nose.""",
     ["How long should you rub your hands with soap?", "When is it especially important to wash your hands?"]),
]

QA_FORMATS = [
    "Read the paragraph below and answer the question.\n\n{text}\n\nQuestion: {q}",
    "{text}\n\nBased on the text above, {ql}",
    "Answer using only the information in this text: {q}\n\nText: {text}",
    "Here is a short text:\n\n{text}\n\nAccording to the text, {ql}",
]

# (text, [rewrite instructions]) for tone changes, simplification and fixes.
REWRITE_TEXTS = [
    ("""Hi Sam,

You still haven't sent me the sales numbers. I asked for them on Monday and it's now Thursday. I can't finish the report without them, and my manager keeps asking me where it is. This is the third time this month that I've had to wait for your part. Send them today. I don't want to have to ask again.

Jordan""",
     ["Rewrite this email in a calm, professional tone.", "Make this email friendlier while keeping the request clear."]),
    ("""hey! so i cant make it to the meeting tmrw, something came up with my kid's school. can u send me the notes after? also i think we should push the deadline for the website thing by like a week bc the designer is still sick. oh and the client called again about the logo colors, they want more blue i guess. lmk what u think. thx!!""",
     ["Rewrite this message in formal English suitable for an email to a manager.", "Rewrite this message with correct spelling, capital letters and full words instead of abbreviations."]),
    ("""Last sumer my family went on a road trip along the coast. We drove for six days and stoped in a diferent town every night. The best part was a small beach were we saw dolphins swiming close to the shore. My little brother was so exited that he dropped his ice cream in the sand. On the way home our car got a flat tire, but a kind farmer helped us change it. I realy hope we can do the same trip again next year.""",
     ["Correct the spelling errors in this paragraph and leave everything else as it is."]),
    ("""This coffee maker is terrible. It takes forever to heat up and the coffee comes out lukewarm. The lid is flimsy and already cracked after two weeks. Also the instructions make no sense at all. Who designed this? I wasted my money and I'm returning it tomorrow. The only good thing is that it looks nice on the counter. Don't buy it, seriously, just don't.""",
     ["Rewrite this review in a calmer, more constructive tone.", "Rewrite this review so it sounds neutral and factual, without exaggeration."]),
    ("""Earthquakes occur when accumulated stress along faults in the Earth's crust is suddenly released. The crust is divided into enormous tectonic plates that move very slowly, typically a few centimeters per year. Where plates meet, friction can prevent them from sliding smoothly, so energy builds up over decades or centuries. When the rocks finally slip, this energy travels outward as seismic waves, which cause the ground to shake. Scientists measure the size of earthquakes using magnitude scales, and they record the waves with instruments called seismometers.""",
     ["Explain this paragraph again using easy words for a young child.", "Rewrite this paragraph as three short, simple sentences."]),
    ("""Dear Residents,

Please be advised that the annual inspection of the fire alarm system will take place on Tuesday, 14 May, between 9:00 and 15:00. During this period, alarms may sound intermittently. There is no need to evacuate the building unless instructed to do so by staff. We kindly request that residents ensure access to their apartments is available, as technicians will need to test the detectors in each unit. We apologize for any inconvenience this may cause.

Building Management""",
     ["Rewrite this notice in a warm, friendly and informal tone.", "Rewrite this notice in plain, simple English."]),
    ("""The project was started by our team in January. Several problems were found by the testers during the first month. A new plan was written by the manager, and extra time was given to the developers. In the end, the app was launched in May and was downloaded by more than five thousand people in the first week. Positive reviews were left by many users, and the team was praised by the company director.""",
     ["Rewrite this text using the active voice instead of the passive voice.", "Rewrite this text so it sounds more exciting, like a short success story."]),
    ("""Sorry I missed your birthday dinner on Saturday. Work was busy all week and I forgot to check my calendar, so I only remembered when I saw the photos online. I know you had saved a seat for me and that you were expecting me. Anyway, I hope you had fun with everyone. Maybe we can get coffee sometime. Let me know.""",
     ["Rewrite this message so the apology sounds warmer and more sincere.", "Rewrite this message to make it shorter but still kind."]),
    ("""Our store sells shoes. We have shoes for men, women and children. We have running shoes, boots and sandals. The prices are low. The store is on Park Street, next to the bank. It is open every day from 9 to 7. We also repair old shoes. Parking is free behind the building. Staff can help you find the right size. Come to our store.""",
     ["Rewrite this ad so it sounds lively and exciting.", "Rewrite this text as a short, friendly social media post."]),
    ("""ok so meeting notes: budget is tight this quarter, marketing wants 5k more but finance says no. we agreed to try cheaper online ads first. Priya will check prices with two agencies by friday. website launch moved to the 20th because testing isn't done. Ben is worried about the mobile version, he'll look at it monday. next meeting same time next week, bring updated numbers.""",
     ["Rewrite these meeting notes as clear, well-written sentences.", "Turn these notes into a tidy list of decisions and action items."]),
    ("""Yesterday I go to the market for buy some vegetables. The seller was very friendly and he give me a discount because I buyed many tomatoes. After that I have meet my friend Carla and we drinked a coffee together in a small cafe near the station. She tell me about her new job in a hotel. I am very happy for she because she search a job since many months.""",
     ["Correct the grammar mistakes in this text but keep the same meaning."]),
    ("""yeah so your package got lost, sorry about that. not really our fault, the delivery company messed up. we can send another one but it'll take like a week. or you can get your money back, whatever you want. just reply and tell us. also next time maybe pick express shipping, it's more reliable. and keep the box if the old one shows up, we'll sort it out later.""",
     ["Rewrite this customer support reply so it sounds professional and polite.", "Rewrite this reply in a warm, apologetic tone."]),
    ("""I am writing this message in order to let you know about the fact that, due to the reason that the weather forecast for this coming Saturday is predicting that there will be heavy rain for most of the day, we have made the decision that it would be best to move the company picnic to the following Saturday instead, which is the 17th, at the same time and place as originally planned.""",
     ["Rewrite this message to be short and clear.", "Rewrite this message in two short sentences."]),
    ("""Nora opens the door of the old cabin and steps inside. Dust floats in the light from the window. On the table, she finds a wooden box with her grandfather's initials carved on the lid. Her hands shake as she lifts it. Inside, there are letters tied with a blue ribbon and a small brass key. She sits down on the dusty floor, unties the ribbon and starts to read the first letter. Outside, the wind begins to howl.""",
     ["Rewrite this story in the past tense.", "Rewrite this short story from Nora's point of view, using \"I\"."]),
    ("""To resolve the connectivity issue, power-cycle the router by disconnecting it from the electrical outlet for approximately thirty seconds. After reconnecting it, wait until the status LED stabilizes, which may take two to three minutes. Subsequently, verify that your device is connected to the correct SSID and re-enter the WPA2 passphrase if prompted. If the issue persists, reset the network settings on your device or contact your internet service provider.""",
     ["Rewrite these instructions in simple, friendly words for someone who is not good with technology.", "Rewrite these instructions as a numbered list of steps."]),
    ("""Hello neighbors. We are having a small party in the garden of number 12 on Saturday the 8th from 4 pm. There will be food and drinks. Children are welcome. If you want, you can bring something to share, but it is not necessary. Please tell us by Wednesday if you are coming so we know how much food to buy. We hope to see you there. From the Morales family.""",
     ["Rewrite this invitation so it sounds more cheerful and welcoming.", "Rewrite this invitation in a more formal style."]),
]

REWRITE_FORMATS = [
    "{instr}\n\n{text}",
    "{instr}\n\nText:\n{text}",
    "Here is a text:\n\n{text}\n\n{instr}",
]

# (text, [extraction instructions]).
EXTRACT_TEXTS = [
    ("""The Harbor Arts Festival will open on Friday, June 7, with a free outdoor concert at 7 p.m. On Saturday, June 8, artists will set up stalls along the waterfront from 10 a.m. to 6 p.m., and there will be a children's painting workshop at 2 p.m. The poetry competition final is on Sunday, June 9, at 11 a.m. in the town hall. The festival ends with a fireworks show on Sunday night at 9:30 p.m. If it rains, the fireworks will be moved to Monday, June 10. Tickets for the workshop go on sale on May 20.""",
     ["Make a list of each event in this text and the time it starts.", "Which days of the week are mentioned in this text? List them."]),
    ("""Yesterday I went to the corner shop and spent a bit more than planned. I bought a loaf of sourdough bread for 4.20, a dozen eggs for 3.50 and two liters of milk for 2.10. I also grabbed a bag of apples for 3.80 because they looked fresh. At the checkout I saw some dark chocolate on sale for 1.99, so I took two bars. Finally, I paid 6.50 for a bunch of flowers for my sister's birthday.""",
     ["List every item that was bought, with its price.", "Extract all the prices from this text as a list."]),
    ("""We are pleased to announce several changes to our leadership team. Maria Gonzalez, who has led the design department for five years, will become Chief Product Officer in April. Her role as head of design will be taken by Kenji Watanabe, currently a senior designer. Amir Haddad joins us from a large bank as our new Finance Director. Finally, after twelve years with the company, Susan O'Brien will retire at the end of March. Please join us in thanking Susan and welcoming Amir.""",
     ["Extract the names of all people mentioned and their new roles.", "List the names of all the people in this announcement."]),
    ("""Hi team, thanks for a great planning session today. A few things to follow up on: Lucy, please send the updated budget to the client by Wednesday. Marco will book the conference room for the workshop on the 22nd. I'll write the first draft of the project plan and share it on Friday. Can someone also check whether the printer on the third floor has been fixed? Finally, everyone should fill in the holiday calendar before the end of the month. Thanks, Hannah""",
     ["List all the action items in this email and who is responsible for each.", "Extract all the deadlines mentioned in this email."]),
    ("""Building a simple birdhouse takes about an afternoon. You will need one pine board about 150 centimeters long, which you cut into six pieces with a hand saw: a floor, a roof, a front, a back and two sides. Drill a hole about three centimeters wide in the front piece using a drill and a spade bit. Join the pieces with wood glue and small nails, using a hammer. Sand any rough edges with sandpaper. Finally, paint the outside with water-based paint, but leave the inside bare, and screw a metal hook onto the roof for hanging.""",
     ["List all the tools and materials needed to build this birdhouse.", "Extract the steps from this text as a numbered list."]),
    ("""Our two-week trip starts in Lisbon, where we will spend three nights exploring the old town. From there we take the train to Porto for two nights and a boat trip on the Douro River. Next, we fly to Seville and rent a car to visit Cordoba and Granada. After Granada, we drive to Valencia for a few beach days. The last part of the trip is Barcelona, where we will stay four nights before flying home to enjoy a quiet week in our own beds.""",
     ["List all the cities mentioned in this travel plan, in order.", "Extract every kind of transport mentioned in this text."]),
    ("""I stayed at the Seaview Hotel for three nights last week. The location is great and the staff at the front desk were very kind. However, the room was smaller than in the photos, the air conditioning was noisy at night, and the shower took ten minutes to get hot. Breakfast was good, but the coffee machine was broken on two mornings. The pool was clean, but it closed at 6 p.m., which is too early in summer. I would come back if they fixed the air conditioning.""",
     ["List all the complaints in this hotel review.", "Extract the positive points the guest mentions."]),
    ("""If you have questions about your order, you can contact our customer service team at help@brightlane.com or call 555-0142 between 8 a.m. and 6 p.m. For returns, please email returns@brightlane.com and include your order number. Business customers should contact Daniel Ortiz at d.ortiz@brightlane.com or on his direct line, 555-0178. Our warehouse address for returns is 48 Foundry Lane, Unit 3, Millbrook. Please do not send returns to our head office.""",
     ["Extract all email addresses from this text.", "List every phone number in this text and say who it belongs to."]),
    ("""Mars is the fourth planet from the Sun. It is about half the size of Earth, and a day on Mars lasts about 24 hours and 37 minutes. A year on Mars, however, is much longer: about 687 Earth days. Mars has two small moons, called Phobos and Deimos. The planet is home to Olympus Mons, the largest volcano in the solar system, which is about three times taller than Mount Everest. The average temperature on Mars is around minus 60 degrees Celsius.""",
     ["Extract all the numbers from this text and say what each one describes.", "List all the names of places and objects mentioned in this text."]),
    ("""Here are the books for our reading club this autumn. In September we will read 'The Lantern Keeper' by Rosa Almeida, a short novel about a lighthouse family. October's book is 'Salt and Thunder' by James Whitfield, which several members suggested last year. In November we will switch to non-fiction with 'A Brief History of Bread' by Nadia Farouk. For December, we will each pick a favorite poem to share instead of reading a book. Meetings are on the last Thursday of each month.""",
     ["List each book title with its author.", "Extract the month and the book for each meeting."]),
    ("""Green Valley Garden Center is hiring a part-time sales assistant. The job is 20 hours per week, including every second Saturday. You will help customers choose plants, water and care for the stock, and work at the till. We are looking for someone who is friendly, reliable and happy to work outdoors in all weather. Some knowledge of plants is helpful but not required. You must be able to lift bags of soil of up to 20 kilograms. The pay is 14 dollars per hour, and staff get a 15 percent discount.""",
     ["List the requirements for this job.", "Extract the main duties of this job as a bullet list."]),
    ("""Today in biology we learned about the parts of a cell. The nucleus is like the control center and contains the cell's DNA. The mitochondria release energy from food, which is why they are often called the powerhouse of the cell. The cell membrane controls what goes in and out. Plant cells also have a cell wall, which makes them stiff, and chloroplasts, which capture light energy. Ribosomes are tiny structures that build proteins. Next week we will look at cells under the microscope.""",
     ["List each part of the cell mentioned and what it does.", "Extract the parts of the cell that only plant cells have."]),
]

EXTRACT_FORMATS = [
    "{instr}\n\n{text}",
    "{instr}\n\nText: {text}",
    "{text}\n\n{instr}",
]


def check_text(text):
    n = len(text.split())
    assert 60 <= n <= 200, (n, text[:60])


def check_code(code):
    lines = code.split("\n")
    nonblank = [l for l in lines if l.strip()]
    assert 8 <= len(nonblank) and len(lines) <= 25, (len(nonblank), len(lines), code[:40])


def lower_first(q):
    return q[0].lower() + q[1:]


def build_open(rng):
    items = []
    for task, templates, topics in OPEN_CATEGORIES:
        for topic in topics:
            if templates is None:
                prompt = topic
            else:
                prompt = rng.choice(templates).format(topic)
            items.append({"group": "open-ended", "task": task, "prompt": prompt, "kind": task})
    rng.shuffle(items)
    return items[:N_OPEN]


def build_grounded(rng):
    items = []

    def add(task, kind, prompt):
        items.append({"group": "input-grounded", "task": task, "prompt": prompt, "kind": kind})

    for lang, code, edits in CODE_SNIPPETS:
        code = code.strip("\n")
        check_code(code)
        for instr, fmt in zip(edits, rng.sample(CODE_FORMATS, len(edits))):
            instr = instr + rng.choice(CODE_SUFFIXES)
            add("code-edit", "code", fmt.format(instr=instr, lang=lang, code=code, name=LANG_NAMES[lang]))

    for text in NEWS:
        check_text(text)
        for fmt in rng.sample(SUMMARY_FORMATS, 2):
            add("summary", "news", fmt.format(text=text))

    for text, questions in QA_PASSAGES:
        check_text(text)
        for q in questions:
            fmt = rng.choice(QA_FORMATS)
            add("qa", "read", fmt.format(text=text, q=q, ql=lower_first(q)))

    for text, instrs in REWRITE_TEXTS:
        check_text(text)
        for instr in instrs:
            fmt = rng.choice(REWRITE_FORMATS)
            add("rewrite", "rewrite", fmt.format(text=text, instr=instr))

    for text, instrs in EXTRACT_TEXTS:
        check_text(text)
        for instr in instrs:
            fmt = rng.choice(EXTRACT_FORMATS)
            add("extract", "extract", fmt.format(text=text, instr=instr))

    rng.shuffle(items)
    return items[:N_GROUNDED]


def main(out_path=None):
    rng = random.Random(0)
    open_items = build_open(rng)
    grounded_items = build_grounded(rng)
    assert len(open_items) == N_OPEN and len(grounded_items) == N_GROUNDED
    items = open_items + grounded_items
    rng.shuffle(items)

    prompts = [it["prompt"] for it in items]
    assert len(set(prompts)) == len(prompts), "duplicate prompt"

    out_path = out_path or os.path.join(os.path.dirname(os.path.abspath(__file__)), "train.jsonl")
    with open(out_path, "w", encoding="utf-8", newline="\n") as f:
        for i, it in enumerate(items, start=1):
            rec = {
                "id": "t%03d-%s" % (i, it["kind"]),
                "group": it["group"],
                "task": it["task"],
                "prompt": it["prompt"],
            }
            f.write(json.dumps(rec, ensure_ascii=False) + "\n")
    print("wrote %d prompts to %s" % (len(items), out_path))


if __name__ == "__main__":  # optional argument: write somewhere else (the tests do)
    main(sys.argv[1] if len(sys.argv) > 1 else None)
