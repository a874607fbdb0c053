"""Generate specdec's bundled sample traffic: synthetic, deterministic, no real personal data.

    python infra/examples/make_sample_traffic.py --out infra/examples/sample-traffic.jsonl --seed 0 --lines 1000

Every line is one request in one of the three traffic forms the profiler reads
(docs/profiler.md): an OpenAI-style log (`timestamp`, `request`, `response`
with `usage`, `latency_s`), a flat record (`prompt`, `completion`, counts,
`arrival_time`, `latency_s`) or ShareGPT (`conversations`). The content covers
the profiler's classes: code, structured (JSON), math, chat/prose,
multilingual, agentic (tool calls) and RAG (long context).

Why it looks the way it does:
- Completions are templated and reuse the prompt's words (names, numbers,
  code), so a tiny model trained on this file for a minute or two answers in
  the same shapes, a distilled draft agrees with it often, and n-gram
  speculation finds prompt n-grams to copy.
- A few lines carry planted redaction targets (e-mail, phone, an `sk-` key, a
  Luhn-valid test card number, an IPv4 address) so the demo's corpus step has
  something to redact. All of them are fictitious: example.com/example.org
  addresses, 555-01xx phone numbers, the well-known 4111... test card number,
  and addresses from the documentation ranges 192.0.2.0/24 and 203.0.113.0/24.
- RAG lines are long on purpose (over 1024 tokens with retrieval markers):
  they are what the profiler calls long context, and a 512-token target skips
  them as too long, which the demo reports.

Invariant: the same --seed and --lines give the same bytes.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

# Start of the synthetic traffic window (2025-01-06T09:00:00Z) and mean gap between arrivals.
START_EPOCH_S = 1736154000.0
MEAN_GAP_S = 1.5
# Share of each content class (sums to 1) and of each form.
CLASS_WEIGHTS = {"code": 0.2, "structured": 0.16, "math": 0.16, "chat": 0.2, "multilingual": 0.1, "agentic": 0.14,
                 "rag": 0.04}
FORM_WEIGHTS = {"openai": 0.45, "flat": 0.35, "sharegpt": 0.2}
PII_SHARE = 0.03

NAMES = ["Ada Moreau", "Bruno Silva", "Chen Wei", "Dara Okafor", "Elena Rossi", "Farid Haddad", "Greta Lind",
         "Hiro Tanaka", "Ines Duarte", "Jonas Berg", "Kira Novak", "Luis Ortega", "Mona Akhtar", "Nils Eriksen"]
CITIES = ["Lyon", "Porto", "Osaka", "Nairobi", "Bergen", "Quito", "Graz", "Leeds", "Busan", "Perth", "Cusco", "Turin"]
ITEMS = ["laptop", "monitor", "keyboard", "headset", "router", "printer", "webcam", "tablet", "charger", "desk lamp"]
TOPICS = {
    "sleeping better": ["Go to bed at the same time every night.", "Keep the bedroom cool and dark.",
                        "Avoid screens for an hour before bed.", "Limit caffeine after noon."],
    "writing clear emails": ["Put the main request in the first sentence.", "Keep each paragraph short.",
                             "Use a subject line that says what you need.", "Read it once before sending."],
    "learning a language": ["Practice a little every day.", "Speak with native speakers early.",
                            "Learn the most common words first.", "Listen to podcasts in the language."],
    "running a meeting": ["Share the agenda in advance.", "Start and end on time.",
                          "Write down decisions and owners.", "Invite only the people who need to be there."],
    "saving money": ["Track every expense for a month.", "Set up an automatic transfer to savings.",
                     "Cancel subscriptions you do not use.", "Cook at home more often."],
    "staying focused": ["Work in blocks of 25 minutes.", "Turn off notifications.",
                        "Keep a list of the next three tasks.", "Take a short walk between blocks."],
}
# (name, operation in words, initial value, update expression) for the code class.
CODE_OPS = [("total", "sum", "0", "result + value"), ("product", "product", "1", "result * value"),
            ("largest", "maximum", "values[0]", "max(result, value)"),
            ("smallest", "minimum", "values[0]", "min(result, value)"),
            ("count_positive", "number of positive items", "0", "result + (1 if value > 0 else 0)")]
TYPES = ["int", "float"]
# English sentence -> translations; accents and scripts make the multilingual class.
SENTENCES = [
    ("The meeting is on Monday.", {"French": "La réunion est lundi.", "Spanish": "La reunión es el lunes.",
                                   "German": "Das Treffen ist am Montag.", "Japanese": "会議は月曜日です。"}),
    ("The train leaves at noon.", {"French": "Le train part à midi.", "Spanish": "El tren sale al mediodía.",
                                   "German": "Der Zug fährt um zwölf Uhr ab.", "Japanese": "電車は正午に出発します。"}),
    ("Thank you for your help.", {"French": "Merci beaucoup pour votre aide.",
                                  "Spanish": "Muchas gracias por su ayuda.",
                                  "German": "Vielen Dank für Ihre Hilfe.", "Japanese": "手伝ってくれてありがとう。"}),
    ("The coffee is very hot.", {"French": "Le café est très chaud.", "Spanish": "El café está muy caliente.",
                                 "German": "Der Kaffee ist sehr heiß.", "Japanese": "コーヒーはとても熱いです。"}),
    ("Where is the station?", {"French": "Où est la gare ?", "Spanish": "¿Dónde está la estación?",
                               "German": "Wo ist der Bahnhof?", "Japanese": "駅はどこですか。"}),
    ("We will arrive tomorrow.", {"French": "Nous arriverons demain.", "Spanish": "Llegaremos mañana.",
                                  "German": "Wir kommen morgen an.", "Japanese": "私たちは明日到着します。"}),
]
# How a user asks for a translation, and how the answer opens, in each language.
ASK_IN = {
    "French": ("Peux-tu traduire cette phrase en français, s'il te plaît ?",
               "Voilà la traduction en français, très simple :"),
    "Spanish": ("¿Puedes traducir esta frase al español, por favor?",
                "Aquí está la traducción al español, más o menos así:"),
    "German": ("Kannst du diesen Satz bitte ins Deutsche übersetzen?",
               "Hier ist die Übersetzung ins Deutsche, ganz natürlich:"),
    "Japanese": ("この文を日本語に翻訳してください。", "日本語の翻訳はこちらです："),
}
ASK_BACK = {
    "French": "Que veut dire cette phrase en anglais ? Réponds en français :",
    "Spanish": "¿Qué significa esta frase en inglés? Responde en español:",
    "German": "Was bedeutet dieser Satz auf Englisch? Antworte auf Deutsch:",
    "Japanese": "この文は英語で何という意味ですか。日本語で答えてください：",
}
# Tool name -> description (what the request's `tools` and the system turn declare).
TOOLS = {
    "get_weather": "Get the current weather for a city.",
    "get_order_status": "Look up the status of an order.",
    "convert_currency": "Convert an amount between currencies.",
}
FACTS = ["The {item} ships from the warehouse in {city} within two business days.",
         "Returns for the {item} are accepted within 30 days of delivery.",
         "The {item} is covered by a two-year limited warranty.",
         "Support for the {item} is available by chat from 8:00 to 18:00.",
         "The {item} must be registered before the warranty applies."]


def _sample(rng: random.Random, weights: dict[str, float]) -> str:
    return rng.choices(list(weights), weights=list(weights.values()))[0]


# --- content classes: each returns (prompt turns before the answer, answer); agentic adds its tool call ---


def _code(rng: random.Random) -> tuple[list[dict], str]:
    name, op, init, expr = rng.choice(CODE_OPS)
    typ = rng.choice(TYPES)
    if rng.random() < 0.5:
        prompt = f"Write a Python function `{name}` that returns the {op} of a list of {typ} values."
    else:
        prompt = (f"Fix this function so it returns the {op} of the values:\n```python\ndef {name}(values):\n"
                  f"    result = {init}\n    for value in values:\n        result = value\n    return result\n```")
    completion = (f"```python\ndef {name}(values: list[{typ}]) -> {typ}:\n"
                  f"    \"\"\"Return the {op} of the values.\"\"\"\n"
                  f"    result = {init}\n    for value in values:\n        result = {expr}\n    return result\n```\n"
                  f"The function `{name}` returns the {op} of the values.")
    return [{"role": "user", "content": prompt}], completion


def _structured(rng: random.Random) -> tuple[list[dict], str]:
    name, city, item = rng.choice(NAMES), rng.choice(CITIES), rng.choice(ITEMS)
    age, qty = rng.randint(21, 79), rng.randint(1, 9)
    prompt = (f"Extract the fields name, age, city, item and quantity as JSON from: "
              f"\"{name}, {age}, from {city}, ordered {qty} x {item}.\"")
    completion = json.dumps({"name": name, "age": age, "city": city, "item": item, "quantity": qty})
    return [{"role": "user", "content": prompt}], completion


def _math(rng: random.Random) -> tuple[list[dict], str]:
    a, b, c = rng.randint(2, 60), rng.randint(2, 12), rng.randint(2, 12)
    if rng.random() < 0.6:
        prompt = f"What is {a} + {b} * {c}? Show the steps."
        completion = f"First, {b} * {c} = {b * c}. Then, {a} + {b * c} = {a + b * c}. The answer is {a + b * c}."
    else:
        x = rng.randint(1, 20)
        prompt = f"Solve for x: {b}x + {a} = {b * x + a}."
        completion = (f"Subtract {a} from both sides: \\( {b}x = {b * x} \\). Divide by {b}: "
                      f"\\( x = \\frac{{{b * x}}}{{{b}}} = {x} \\). The answer is x = {x}.")
    return [{"role": "user", "content": prompt}], completion


def _chat(rng: random.Random) -> tuple[list[dict], str]:
    topic = rng.choice(list(TOPICS))
    if rng.random() < 0.35:
        # A rewrite copies most of its prompt: what n-gram speculation feeds on.
        tip = rng.choice(TOPICS[topic])
        prompt = f"Rewrite this advice about {topic} as a friendly reminder: {tip}"
        completion = f"Friendly reminder about {topic}: {tip} You can do it!"
        return [{"role": "user", "content": prompt}], completion
    tips = rng.sample(TOPICS[topic], 3)
    prompt = rng.choice(["Give me three tips for {t}.", "What are three good habits for {t}?",
                         "I need advice on {t}. Three tips, please."]).format(t=topic)
    completion = f"Here are three tips for {topic}:\n" + "\n".join(f"{i}. {tip}" for i, tip in enumerate(tips, 1))
    completion += f"\nStart with one of them, and {topic} will get easier."
    return [{"role": "user", "content": prompt}], completion


def _multilingual(rng: random.Random) -> tuple[list[dict], str]:
    english, translations = rng.choice(SENTENCES)
    language = rng.choice(list(translations))
    ask, answer = ASK_IN[language]
    if rng.random() < 0.6:
        prompt = f"{ask} \"{english}\""
        completion = f"{answer} « {translations[language]} »"
    else:
        prompt = f"{ASK_BACK[language]} « {translations[language]} »"
        completion = f"« {translations[language]} » = \"{english}\". {answer} « {translations[language]} »"
    return [{"role": "user", "content": prompt}], completion


def _agentic(rng: random.Random) -> tuple[list[dict], str, dict]:
    tool = rng.choice(list(TOOLS))
    city, name = rng.choice(CITIES), rng.choice(NAMES)
    args: dict[str, Any]  # the tool's arguments: strings, and a number for the conversion
    if tool == "get_weather":
        ask, args = f"What is the weather in {city} right now?", {"city": city}
        result = {"city": city, "temp_c": rng.randint(-5, 32), "sky": rng.choice(["sunny", "cloudy", "rainy"])}
        answer = f"It is {result['temp_c']} degrees and {result['sky']} in {city}."
    elif tool == "get_order_status":
        order = f"A-{rng.randint(10000, 99999)}"
        ask, args = f"Hi, this is {name}. Where is my order {order}?", {"order_id": order}
        result = {"order_id": order, "status": rng.choice(["shipped", "packed", "delivered"])}
        answer = f"Your order {order} is {result['status']}, {name.split()[0]}."
    else:
        amount = rng.randint(10, 900)
        ask, args = f"Convert {amount} EUR to USD.", {"amount": amount, "from": "EUR", "to": "USD"}
        rate = round(rng.uniform(1.02, 1.12), 2)
        result = {"amount": amount, "rate": rate, "converted": round(amount * rate, 2)}
        answer = f"{amount} EUR is {result['converted']} USD at a rate of {rate}."
    call = {"name": tool, "arguments": args}
    turns = [{"role": "system", "content": f"You can call the tool {tool}: {TOOLS[tool]}"},
             {"role": "user", "content": ask},
             {"role": "function_call", "content": json.dumps(call)},
             {"role": "observation", "content": json.dumps(result)}]
    return turns, answer, call


def _rag(rng: random.Random) -> tuple[list[dict], str]:
    item, city = rng.choice(ITEMS), rng.choice(CITIES)
    docs = []
    for d in range(1, 9):  # eight documents: long context, well over 1024 tokens with the question
        body = " ".join(rng.choice(FACTS).format(item=rng.choice(ITEMS), city=rng.choice(CITIES)) for _ in range(14))
        docs.append(f"<document id=\"{d}\">\n{body}\n</document>")
    key_fact = FACTS[0].format(item=item, city=city)
    docs.insert(rng.randrange(len(docs)), f"<document id=\"9\">\n{key_fact}\n</document>")
    prompt = "Context:\n" + "\n".join(docs) + f"\n\nQuestion: Where does the {item} ship from, and how fast?"
    completion = f"According to document 9, the {item} ships from the warehouse in {city} within two business days."
    return [{"role": "user", "content": prompt}], completion


# --- planted redaction targets (all fictitious) --------------------------------------------------------


def _pii(rng: random.Random) -> tuple[list[dict], str]:
    name = rng.choice(NAMES)
    user = name.lower().replace(" ", ".")
    kind = rng.randrange(5)
    if kind == 0:
        prompt = (f"Please update my contact e-mail to {user}@example.com and my phone to "
                  f"(555) 013-{rng.randint(1000, 9999)}.")
        completion = f"Done, {name.split()[0]}. Your e-mail is now {user}@example.com and your phone number is updated."
    elif kind == 1:
        alphabet = "abcdefghijkmnopqrstuvwxyzABCDEFGHJKLMNPQRSTUVWXYZ23456789"
        key = "sk-" + "".join(rng.choice(alphabet) for _ in range(32))
        prompt = f"My script fails with 401 when I call the API with key {key}. What is wrong?"
        completion = ("A 401 means the key was rejected. Check that the key is active and sent in the Authorization "
                      "header.")
    elif kind == 2:
        prompt = (f"I was charged twice on card 4111 1111 1111 1111 for one {rng.choice(ITEMS)}. "
                  "Can you refund one charge?")
        completion = "I am sorry about the double charge. I have asked for a refund of one charge to the same card."
    elif kind == 3:
        ip = f"{rng.choice(['192.0.2', '203.0.113'])}.{rng.randint(1, 254)}"
        prompt = f"The server at {ip} stopped answering on port 8080 after the update. How do I check it?"
        completion = (f"First check that the service on {ip} is running, then check that port 8080 is open in the "
                      "firewall.")
    else:
        prompt = f"Call me back at +1 555 010 {rng.randint(1000, 9999)} or write to {user}@example.org about my order."
        completion = f"Thank you, {name.split()[0]}. We will contact you about your order within one business day."
    return [{"role": "user", "content": prompt}], completion


# --- forms -------------------------------------------------------------------------------------------


def estimate_tokens(text: str) -> int:
    """About four characters a token (two for non-ASCII): the counts a log of this size would carry."""
    ascii_chars = len(text.encode("ascii", "ignore"))
    return max(1, math.ceil(ascii_chars / 4 + (len(text) - ascii_chars) / 2)) if text else 0


def _openai(turns: list[dict], completion: str, call: dict | None, *, rng: random.Random, t: float, lat: float) -> dict:
    messages: list[dict] = []
    request: dict = {"model": "toy-llama", "temperature": 0.7, "max_tokens": 256}
    for turn in turns:
        if turn["role"] == "function_call":
            messages.append({"role": "assistant", "content": None, "tool_calls": [
                {"id": "call_1", "type": "function",
                 "function": {"name": call["name"], "arguments": json.dumps(call["arguments"])}}]})  # type: ignore[index]  # a function_call turn comes with its call (_agentic)
        elif turn["role"] == "observation":
            messages.append({"role": "tool", "tool_call_id": "call_1", "content": turn["content"]})
        else:
            messages.append(dict(turn))
    request["messages"] = messages
    if call is not None:
        request["tools"] = [{"type": "function", "function": {"name": call["name"], "description": TOOLS[call["name"]],
                                                              "parameters": {"type": "object"}}}]
    if completion.startswith("{"):
        request["response_format"] = {"type": "json_object"}
    prompt_text = "\n".join(m["content"] or "" for m in messages)
    stamp = t + rng.random() * 0.001
    return {
        "timestamp": _iso(stamp),
        "request": request,
        "response": {"choices": [{"index": 0, "message": {"role": "assistant", "content": completion},
                                  "finish_reason": "stop"}],
                     "usage": {"prompt_tokens": estimate_tokens(prompt_text),
                               "completion_tokens": estimate_tokens(completion)}},
        "latency_s": lat,
    }


def _flat(turns: list[dict], completion: str, *, rng: random.Random, t: float, lat: float) -> dict:
    prompt = "\n".join(turn["content"] for turn in turns)
    record: dict[str, Any] = {"prompt": prompt, "completion": completion}
    if rng.random() < 0.8:  # a fifth of the flat lines carry no counts: the profiler estimates or tokenizes them
        record["input_tokens"] = estimate_tokens(prompt)
        record["output_tokens"] = estimate_tokens(completion)
    record["arrival_time"] = round(t, 3)
    record["latency_s"] = lat
    return record


def _sharegpt(turns: list[dict], completion: str) -> dict:
    speakers = {"user": "human", "system": "system", "function_call": "function_call", "observation": "observation"}
    conversation = [{"from": speakers[turn["role"]], "value": turn["content"]} for turn in turns]
    conversation.append({"from": "gpt", "value": completion})
    return {"conversations": conversation}


def _iso(epoch_s: float) -> str:
    return datetime.fromtimestamp(epoch_s, tz=UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def generate(seed: int, lines: int) -> list[dict]:
    """The traffic records, in arrival order. Pure: the same arguments give the same records."""
    if lines < 1:
        raise ValueError(f"--lines must be at least 1 (got {lines})")
    rng = random.Random(seed)
    makers = {"code": _code, "structured": _structured, "math": _math, "chat": _chat,
              "multilingual": _multilingual, "rag": _rag}
    out: list[dict] = []
    t = START_EPOCH_S
    for _ in range(lines):
        t += rng.expovariate(1 / MEAN_GAP_S)
        call = None
        if rng.random() < PII_SHARE:
            turns, completion = _pii(rng)
        else:
            cls = _sample(rng, CLASS_WEIGHTS)
            if cls == "agentic":
                turns, completion, call = _agentic(rng)
            else:
                turns, completion = makers[cls](rng)
        # Latency grows with the output, as a served model's would.
        lat = round(0.08 + 0.012 * estimate_tokens(completion) + rng.random() * 0.05, 3)
        # Tool-call turns need a form that can carry them: OpenAI messages or ShareGPT turns.
        form = _sample(rng, FORM_WEIGHTS)
        if call is not None and form == "flat":
            form = "sharegpt"
        if form == "openai":
            out.append(_openai(turns, completion, call, rng=rng, t=t, lat=lat))
        elif form == "flat":
            out.append(_flat(turns, completion, rng=rng, t=t, lat=lat))
        else:
            out.append(_sharegpt(turns, completion))
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True, help="JSONL file to write")
    parser.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    parser.add_argument("--lines", type=int, default=1000, help="number of requests (default 1000)")
    args = parser.parse_args(argv)
    try:
        records = generate(args.seed, args.lines)
    except ValueError as exc:
        print(f"make_sample_traffic: {exc}", file=sys.stderr)
        return 2
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with args.out.open("w", encoding="utf-8", newline="\n") as handle:
        for record in records:
            handle.write(json.dumps(record, ensure_ascii=False) + "\n")
    print(f"wrote {len(records)} lines to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
